"""The PTX engine: compile a kernel, read its PTX once, and follow it.

:mod:`.compile` gets the PTX (through the real compiler in a subprocess in the simulator); :mod:`.parse`
reads its instructions; :mod:`.values` says what each opcode computes; :mod:`.machine` steps a launch's
lanes through it (the ledger's static count); :mod:`.accesses` lists one thread's loads and stores by
argument (:func:`count_global_accesses`, the instruction view a lesson shows).
"""

from ..record import CannotAttribute
from .accesses import PtxCounts, analyze_ptx, count_global_accesses
from .compile import cache_dir, cached, compile_ptx, compile_request, describe_arg, global_names
from .parse import access_bytes
