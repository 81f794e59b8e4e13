"""The static count's entry points, where the ledger and the grader import them: :mod:`.ptx.machine` does the work.

:func:`emulate` follows a kernel's PTX for every thread of a launch and returns the
distinct elements each thread reads and writes (:class:`EmulatedCounts`);
:data:`DATA_INDEX` and :data:`DATA_BRANCH` are the words of its refusals.
"""

from .ptx.machine import EmulatedCounts, emulate, emulate_ranges
from .record import DATA_BRANCH, DATA_INDEX

__all__ = ["DATA_BRANCH", "DATA_INDEX", "EmulatedCounts", "emulate", "emulate_ranges"]
