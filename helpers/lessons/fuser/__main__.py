"""``python -m helpers.lessons.fuser``: the tiny fuser against the hand-written kernel and torch.compile."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
