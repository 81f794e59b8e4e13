"""python -m helpers.lessons.attention attention|ncu-attention|plots: see :mod:`helpers.lessons.attention.measure`."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
