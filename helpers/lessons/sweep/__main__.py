"""``python -m helpers.lessons.sweep``: the size sweep of notebook 05 (``make bench``)."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
