"""The ledger's two counting engines and their one definition of a count.

A *count* is, for every array argument of a launch, the bytes of the distinct elements each
thread loads and stores, summed over threads (:class:`Traffic`).  :func:`static_traffic`
compiles the kernel to PTX (:mod:`.ptx`; through the real compiler in a subprocess in the
simulator) and follows it for every thread on the host; :func:`simulated_traffic` runs the
launch in Numba's CUDA simulator and records what each thread touched.  Either returns the
true count or raises :class:`CannotAttribute` saying what it cannot follow; :func:`compare_counts`
runs both.  :mod:`.record` holds what both share, :mod:`.other_backend` runs a function under
the other CUDA backend, :mod:`.carry` carries a kernel's globals to a simulator subprocess.
"""

from .record import (ArgInfo, ArrayTraffic, CannotAttribute, HostCopy, LaunchArgs, LinkedCall, OutOfBounds, Traffic,
                     copies_for_a_count, copying_for_a_count, is_array)
from .traffic import (Comparison, compare_counts, comparison_table, launch_dims, naming_arguments, recording_arguments,
                      simulated_traffic, static_traffic, traffic_from_touches)
