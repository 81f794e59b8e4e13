"""The ledger's two counting engines (:mod:`.traffic`): :func:`static_traffic` follows the kernel's PTX (:mod:`.ptx`),
:func:`simulated_traffic` runs the launch in Numba's CUDA simulator; either gives the true count or raises
:class:`CannotAttribute` saying what it cannot follow.  :mod:`.record` holds what both share."""

from .record import (ArgInfo, ArrayTraffic, CannotAttribute, HostCopy, LaunchArgs, LinkedCall, OutOfBounds, Traffic,
                     copies_for_a_count, copying_for_a_count, is_array)
from .traffic import (Comparison, compare_counts, comparison_table, launch_dims, naming_arguments, recording_arguments,
                      simulated_traffic, static_traffic, traffic_from_touches)
