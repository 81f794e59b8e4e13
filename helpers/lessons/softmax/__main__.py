"""python -m helpers.lessons.softmax softmax|plots: see :mod:`helpers.lessons.softmax.measure`."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
