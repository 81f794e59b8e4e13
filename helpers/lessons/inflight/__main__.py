"""``python -m helpers.lessons.inflight``: DRAM latency, the bandwidth curve and the series' kernels against the model."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
