"""The PTX engine: compile a kernel, read its PTX once, and follow it.

* :mod:`.compile`: the PTX for a kernel and its argument types (:func:`compile_ptx`), on a
  GPU or, in the simulator, through the real compiler in a subprocess;
* :mod:`.parse`: the first kernel's instructions (:class:`~.parse.Instruction`) and labels;
* :mod:`.values`: what each opcode computes, exactly or over a range of blocks;
* :mod:`.machine`: the lanes of a launch stepped through the program in either domain, recording
  the elements each thread touches (the ledger's static count, :func:`~.machine.emulate`);
* :mod:`.accesses`: the loads and stores in one thread's code, by argument
  (:func:`count_global_accesses`, the instruction view a lesson shows).

Either refuses with a :class:`CannotAttribute` (:mod:`helpers.counting.record`) naming what it cannot follow.
"""

from ..record import CannotAttribute
from .accesses import GlobalAccess, PtxCounts, analyze_ptx, count_global_accesses
from .compile import (cache_dir, compile_ptx, compile_request, describe_arg, global_names, kernel_source,
                      strip_decorators)
from .parse import access_bytes

_global_names = global_names  # the name helpers.classroom.compiled imports

__all__ = [
    "CannotAttribute", "GlobalAccess", "PtxCounts", "access_bytes", "analyze_ptx", "cache_dir", "compile_ptx",
    "compile_request", "count_global_accesses", "describe_arg", "global_names", "kernel_source", "strip_decorators",
]
