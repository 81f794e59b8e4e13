"""python -m helpers.lessons.optimizer adamw|plots: see :mod:`helpers.lessons.optimizer.measure`."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
