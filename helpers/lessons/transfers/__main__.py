"""``python -m helpers.lessons.transfers {host-link,two-gpus}``: copies over the host link, and between two GPUs."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
