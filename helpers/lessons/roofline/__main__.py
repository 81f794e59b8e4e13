"""``python -m helpers.lessons.roofline``: time every fused variant beside torch.compile and the streaming kernels (GPU)."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
