"""``python -m helpers.lessons.launches``: host time per launch, and fusion beside CUDA graphs (notebook 09)."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
