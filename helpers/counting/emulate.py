"""The static count's entry points (:mod:`.ptx.machine` does the work): :func:`emulate` follows a kernel's PTX for
every thread of a launch and returns the distinct elements each thread reads and writes."""

from .ptx.machine import emulate, emulate_ranges  # noqa: F401
