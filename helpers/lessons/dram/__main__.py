"""``python -m helpers.lessons.dram {collect,corpus,workload}``: Nsight Compute's DRAM bytes beside the ledger's."""

from helpers.harness.cli import run

from .measure import COMMANDS

run(__package__, COMMANDS)
