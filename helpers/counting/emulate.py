"""The static count's entry points, where the ledger and the grader import them: :mod:`.ptx.machine` does the work.

:func:`emulate` follows a kernel's PTX for every thread of a launch and returns the
distinct elements each thread reads and writes (:class:`ElementCounts`);
:data:`DATA_INDEX` and :data:`DATA_BRANCH` are the words of its refusals.
"""

from .ptx.machine import emulate, emulate_ranges
from .record import DATA_BRANCH, DATA_INDEX, ElementCounts

__all__ = ["DATA_BRANCH", "DATA_INDEX", "ElementCounts", "emulate", "emulate_ranges"]
