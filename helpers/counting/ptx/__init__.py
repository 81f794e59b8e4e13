"""The PTX engine: :mod:`.compile` a kernel, :mod:`.parse` its PTX once, and follow it: :mod:`.machine` (with
:mod:`.values`) for the ledger's static count, :mod:`.accesses` for the instruction view a lesson shows."""

from ..record import CannotAttribute
from .accesses import PtxCounts, analyze_ptx, count_global_accesses
from .compile import cache_dir, cached, compile_ptx, compile_request, compile_shapes, describe_arg, global_names
from .parse import access_bytes
