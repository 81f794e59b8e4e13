"""The ledger's two counting engines and their one definition of a count.

A *count* is, for every array argument of a launch, the bytes of the distinct
elements each thread loads and stores, summed over threads (:class:`Traffic`).

* :mod:`.ptx` and :func:`static_traffic`: compile the kernel to PTX (on a GPU, or
  through the real compiler in a subprocess in the simulator) and follow that PTX
  for every thread on the host (:mod:`.emulate`);
* :func:`simulated_traffic`: run the launch in Numba's CUDA simulator and record
  what each thread touched.

:mod:`.record` holds what both share: :class:`Traffic` (a count: one :class:`ArrayTraffic`
row per array), :class:`LaunchArgs` (one launch's arguments, built once by
:mod:`helpers.launch_hook`; :meth:`LaunchArgs.traffic` turns an engine's element counts
into those rows) and :class:`CannotAttribute`;
:mod:`.other_backend` runs a function under the other CUDA backend, and :mod:`.carry`
describes a kernel and the globals it uses so that a simulator subprocess can rebuild it.

Either returns the true count or raises :class:`CannotAttribute` saying what it
cannot follow.  :func:`compare_counts` runs both on one launch.
"""

from .ptx import PtxCounts, count_global_accesses
from .record import (ArgInfo, ArrayTraffic, CannotAttribute, DataDependentBranch, ElementCounts, HostCopy, LaunchArgs,
                     LinkedCall, OutOfBounds, Traffic, copies_for_a_count, copying_for_a_count, is_array)
from .traffic import (Comparison, compare_counts, comparison_table, launch_dims, naming_arguments, recording_arguments,
                      simulated_traffic, static_traffic, traffic_from_touches)

__all__ = [
    "ArgInfo", "ArrayTraffic", "ElementCounts", "HostCopy", "LaunchArgs", "is_array", "CannotAttribute", "DataDependentBranch", "LinkedCall", "OutOfBounds", "copies_for_a_count", "copying_for_a_count", "Comparison", "PtxCounts", "Traffic", "compare_counts", "comparison_table",
    "count_global_accesses", "launch_dims", "naming_arguments", "recording_arguments", "simulated_traffic", "static_traffic",
    "traffic_from_touches",
]
