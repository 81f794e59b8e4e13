"""Nsight Compute's CSV output, written for the parser tests (tests/test_ncu.py, tests/test_seed_claims.py).

``ncu --csv --print-units base`` prints one quoted row per kernel and metric under a
fixed header.  The tests' fixtures are made up, not measurements: :func:`ncu_csv`
writes them in that format from only what varies between their rows.
"""

from __future__ import annotations

from typing import Mapping, Sequence

COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
           "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
"""The header of ncu's CSV table."""


def _quoted(values: Sequence[str]) -> str:
    return ",".join(f'"{value}"' for value in values) + "\n"


def ncu_csv(process: tuple[str, str, str], grid: str, kernels: Mapping[str, Mapping[str, tuple[str, str]]]) -> str:
    """ncu's CSV table: the header, then one row for each metric of each kernel, each line ending in a newline.

    ``process`` is the process ID, process name and host name of every row; every kernel ran
    with blocks of 256 threads on ``grid`` on device 0 (compute capability 9.0).  ``kernels``
    maps each kernel's name, in launch order (ncu's ID is that position), to its metrics:
    metric name to (unit, value), the value as ncu writes it.
    """
    rows = [(str(launch), *process, kernel, "1", "7", "(256, 1, 1)", grid, "0", "9.0", "Command line profiler metrics",
             metric, unit, value)
            for launch, (kernel, metrics) in enumerate(kernels.items()) for metric, (unit, value) in metrics.items()]
    return "".join(_quoted(row) for row in [COLUMNS, *rows])
