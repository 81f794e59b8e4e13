"""The ledger's two counting engines and their one definition of a count.

A *count* is, for every array argument of a launch, the bytes of the distinct
elements each thread loads and stores, summed over threads (:class:`Traffic`).

* :mod:`.ptx` and :func:`static_traffic`: read the compiled PTX (works on a GPU and,
  through the real compiler in a subprocess, in the simulator too);
* :func:`simulated_traffic`: run the launch in Numba's CUDA simulator and record
  what each thread touched.

Either returns the true count or raises :class:`CannotAttribute` saying what it
cannot follow.  :func:`compare_counts` runs both on one launch.
"""

from .ptx import CannotAttribute, PtxCounts, count_global_accesses
from .traffic import (
    Comparison,
    Traffic,
    compare_counts,
    comparison_table,
    launch_dims,
    recording_arguments,
    simulated_traffic,
    static_traffic,
    threads_passing_guard,
    traffic_from_touches,
)

__all__ = [
    "CannotAttribute", "Comparison", "PtxCounts", "Traffic", "compare_counts", "comparison_table",
    "count_global_accesses", "launch_dims", "recording_arguments", "simulated_traffic", "static_traffic",
    "threads_passing_guard", "traffic_from_touches",
]
