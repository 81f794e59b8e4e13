"""Compile a kernel to PTX, and list its global-memory loads and stores per thread.

The ledger's static count (:func:`helpers.counting.static_traffic`) compiles here and
then follows the PTX for every thread (:mod:`helpers.counting.emulate`).  This module's
:func:`count_global_accesses` is the per-thread *instruction* view a lesson shows: it
looks at the instructions the compiler emitted, not at what ran.  Each ``ld.global``/``st.global`` is attributed to the array argument
whose data pointer its address was computed from, by following registers forward
from the ``ld.param`` that fetched that pointer.

The PTX comes from ``numba.cuda.compile_ptx``, which needs NVVM but no GPU.  In the
CUDA simulator ``numba.cuda`` has no compiler, so the kernel's source is compiled in
a short-lived subprocess that imports the real ``numba.cuda`` instead.
"""

from __future__ import annotations

import ast
import dis
import hashlib
import inspect
import json
import os
import re
import textwrap
import traceback
import types as pytypes
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

from ..backend import is_simulator
from ..device import compute_capability
from .other_backend import COMPILER, OtherBackendError, run_under
from .record import ArgInfo, ArgType, CannotAttribute

# Parameters an array argument is flattened into by numba-cuda's data model:
# meminfo, parent, nitems, itemsize, data, shape[ndim], strides[ndim].
_ARRAY_DATA_FIELD = 4


def describe_arg(value: Any) -> ArgType:
    """The :class:`ArgType` Numba would infer for a kernel argument."""
    try:
        return ArgInfo.of("argument", value).argtype
    except TypeError as exc:
        raise CannotAttribute(f"cannot attribute accesses for an argument of type {type(value).__name__}") from exc


_DATA = -1
"""Taint marker: the value was loaded from global memory (so an address using it is data-dependent)."""


@dataclass
class GlobalAccess:
    """One global-memory access as the static count counts it."""

    op: str  # "load" or "store"
    instruction: str
    nbytes: int
    arg_index: int | None  # None: cannot attribute (see ``reason``)
    in_loop: bool
    address: str = ""  # the address operand with register versions, e.g. "%rd16@1+4"
    reason: str | None = None  # why it cannot be attributed, when arg_index is None


@dataclass
class PtxCounts:
    """Global loads and stores per thread (per iteration for a grid-stride loop), by argument.

    What is counted (the same definition as the simulator count in
    :mod:`helpers.counting`): the *distinct elements* a thread touches.

    * A thread that reads ``x[i]`` twice makes one load: the second read is served
      from a register.  The compiler usually removes it already (``a[i] + a[i]``
      compiles to one ``ld.global``); where aliasing stops it from doing so, the
      counter drops a load whose address is the same register value as an earlier
      load or store of the same thread.  ``x[i]`` and ``x[i + 1]`` are two loads.
    * A loop the compiler unrolled is counted per *source* iteration: the copies of
      the body are recognised and counted once.

    ``instructions`` keeps every ``ld``/``st`` in the PTX, before deduplication.
    """

    accesses: list[GlobalAccess] = field(default_factory=list)
    local_accesses: int = 0
    instructions: list[GlobalAccess] = field(default_factory=list)
    grid_stride: bool = False

    def loads(self, arg_index: int | None = None) -> int:
        return sum(1 for a in self.accesses if a.op == "load" and (arg_index is None or a.arg_index == arg_index))

    def stores(self, arg_index: int | None = None) -> int:
        return sum(1 for a in self.accesses if a.op == "store" and (arg_index is None or a.arg_index == arg_index))

    def bytes(self, op: str, arg_index: int) -> int:
        return sum(a.nbytes for a in self.accesses if a.op == op and a.arg_index == arg_index)

    @property
    def unattributed(self) -> list[GlobalAccess]:
        return [a for a in self.accesses if a.arg_index is None]

    @property
    def has_loop(self) -> bool:
        return any(a.in_loop for a in self.accesses)

    def reasons(self) -> list[str]:
        """Why some accesses cannot be attributed (empty when every access is attributed)."""
        found: list[str] = []
        for a in self.unattributed:
            if a.reason and a.reason not in found:
                found.append(a.reason)
        return found

    def require_attributed(self, kernel: str) -> None:
        """Raise :class:`CannotAttribute`, with the reasons, unless every access is attributed."""
        if self.unattributed:
            raise CannotAttribute(
                f"cannot attribute {len(self.unattributed)} global memory access(es) of {kernel}: "
                + "; ".join(self.reasons())
            )


_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}
_PARAM_RE = re.compile(r"\.param\s+\.\w+\s+(\S+?)_param_(\d+)")
_REG_RE = re.compile(r"%[a-z]+\d*")
_LABEL_RE = re.compile(r"^(\$?[\w$]+):")
_BRANCH_RE = re.compile(r"\bbra(?:\.uni)?\s+(\$?[\w$]+);")

_DATA_INDEX = "its address depends on a value loaded from memory (a data-dependent index such as x[idx[i]])"
_DATA_BRANCH = "it runs only when a value loaded from memory says so (data-dependent branch)"
_NOT_GRID_STRIDE = (
    "it sits in a loop that is not a grid-stride loop, so the static counter cannot know "
    "how many times it runs"
)
_NESTED = "it sits in nested loops, whose trip counts the static counter cannot know"
_COPIES_DISAGREE = "the unrolled copies of its loop access different arrays, so one iteration cannot be told apart"


def access_bytes(opcode: str) -> int:
    """Bytes one execution of a load/store opcode moves, e.g. 16 for ``ld.global.v4.f32``."""
    parts = opcode.split(".")
    width = 1
    size = 4
    for p in parts:
        if p in ("v2", "v4", "v8"):
            width = int(p[1:])
        elif p[:1] in "bfsu" and p[1:] in _TYPE_BYTES:
            size = _TYPE_BYTES[p[1:]]
    return width * size


def _owner(owners: frozenset[int]) -> tuple[int | None, str | None]:
    """The array an address belongs to, or ``None`` and the reason."""
    if _DATA in owners:
        return None, _DATA_INDEX
    if len(owners) == 1:
        return next(iter(owners)), None
    if not owners:
        return None, "its address is not computed from any array argument's data pointer"
    names = ", ".join(f"argument {i}" for i in sorted(owners))
    return None, f"its address is computed from several arrays ({names})"


def _entry_lines(ptx: str) -> list[str]:
    body = ptx[ptx.index("{", ptx.index(".entry")) :]
    return [ln.strip() for ln in body.splitlines()]


def _find_loops(lines: list[str]) -> list[tuple[int, int]]:
    """(first line, back-edge line) of every loop: a branch to a label above it."""
    label_line = {m.group(1): i for i, ln in enumerate(lines) if (m := _LABEL_RE.match(ln))}
    return [
        (label_line[m.group(1)], i)
        for i, ln in enumerate(lines)
        if (m := _BRANCH_RE.search(ln)) and m.group(1) in label_line and label_line[m.group(1)] < i
    ]


def _scan(
    lines: list[str], data_param: dict[int, int], loops: list[tuple[int, int]]
) -> tuple[list[tuple[int | None, GlobalAccess]], int]:
    """Every global access in program order with its loop, owner and address key."""
    taint: dict[str, frozenset[int]] = {}
    found: list[tuple[int | None, GlobalAccess]] = []
    local = 0
    for _ in range(3):  # loops carry values around a back edge: iterate to a fixed point
        found, local = [], 0
        version: dict[str, int] = {}
        after_data_branch = False
        for i, line in enumerate(lines):
            if not line or line.startswith(("//", ".", "{", "}")) or _LABEL_RE.match(line):
                continue
            instr = line.split(";")[0]
            guard_regs: list[str] = []
            if instr.startswith("@"):
                guard, _, instr = instr.partition(" ")
                guard_regs = _REG_RE.findall(guard)
            guarded_by_data = any(_DATA in taint.get(r, frozenset()) for r in guard_regs)
            opcode, _, operands = instr.strip().partition(" ")
            regs = _REG_RE.findall(operands)
            loop = next((k for k, (start, end) in enumerate(loops) if start <= i <= end), None)
            family, _, rest = opcode.partition(".")
            if family == "bra":
                after_data_branch = after_data_branch or guarded_by_data
                continue
            if opcode.startswith("ld.param"):
                m = re.search(r"_param_(\d+)\]", operands)
                if m and regs and int(m.group(1)) in data_param:
                    taint[regs[0]] = frozenset({data_param[int(m.group(1))]})
                if regs:
                    version[regs[0]] = version.get(regs[0], 0) + 1
                continue
            space = rest.split(".")[0]
            if family in ("ld", "st") and space == "local":
                local += 1
                continue
            # Global and generic addresses both count: numba emits ld.global, but a
            # generic ld/st through a global pointer still reaches device memory.
            if family in ("ld", "st", "atom", "red") and space not in ("param", "shared", "const", "local"):
                address = re.search(r"\[([^\]]+)\]", operands)
                text = address.group(1).replace(" ", "") if address else ""
                addr_regs = _REG_RE.findall(text)
                owners = frozenset().union(*(taint.get(r, frozenset()) for r in addr_regs))
                owner, reason = _owner(owners)
                if owner is not None and (after_data_branch or guarded_by_data):
                    owner, reason = None, _DATA_BRANCH
                key = _REG_RE.sub(lambda m: f"{m.group(0)}@{version.get(m.group(0), 0)}", text)
                ops = {"ld": ["load"], "st": ["store"], "atom": ["load", "store"], "red": ["load", "store"]}[family]
                for op in ops:
                    found.append((loop, GlobalAccess(op, opcode, access_bytes(opcode), owner, loop is not None, key, reason)))
                if family in ("ld", "atom") and regs and not regs[0] in addr_regs:
                    taint[regs[0]] = frozenset({_DATA})
                    version[regs[0]] = version.get(regs[0], 0) + 1
                continue
            if regs:  # any other instruction: the destination inherits its sources' taint
                dest, sources = regs[0], regs[1:] + guard_regs
                merged = frozenset().union(*(taint.get(r, frozenset()) for r in sources))
                if merged:
                    taint[dest] = taint.get(dest, frozenset()) | merged
                version[dest] = version.get(dest, 0) + 1
    return found, local


def _distinct(accesses: list[GlobalAccess]) -> list[GlobalAccess]:
    """Drop a load of an address the thread already loaded or stored, and a repeated store."""
    loaded: set[tuple[int | None, str]] = set()
    stored: set[tuple[int | None, str]] = set()
    kept = []
    for a in accesses:
        key = (a.arg_index, a.address)
        if a.arg_index is not None and (key in stored or (a.op == "load" and key in loaded)):
            continue
        (loaded if a.op == "load" else stored).add(key)
        kept.append(a)
    return kept


def _signature(accesses: list[GlobalAccess]) -> dict[tuple[str, int | None, int], int]:
    counts: dict[tuple[str, int | None, int], int] = {}
    for a in accesses:
        k = (a.op, a.arg_index, a.nbytes)
        counts[k] = counts.get(k, 0) + 1
    return counts


def _one_iteration(regions: dict[int, list[GlobalAccess]], loops: list[tuple[int, int]]) -> list[GlobalAccess]:
    """The accesses of one source iteration, from the loop copies the compiler made.

    An unrolled grid-stride loop appears as a remainder loop (one copy of the body)
    and a main loop (k copies).  The copy with the fewest accesses is one
    iteration; every other loop must hold a whole multiple of it.
    """
    nested = any(
        a != b and loops[a][0] <= loops[b][0] and loops[b][1] <= loops[a][1]
        for a in range(len(loops))
        for b in range(len(loops))
    )
    every = [a for group in regions.values() for a in group]
    if nested:
        return [_unattributed(a, _NESTED) for a in every]
    distinct = {k: _distinct(v) for k, v in regions.items()}
    smallest = min(distinct.values(), key=len)
    base = _signature(smallest)
    for group in distinct.values():
        sig = _signature(group)
        factor = len(group) // max(len(smallest), 1)
        if set(sig) != set(base) or any(sig[k] != factor * base[k] for k in base):
            return [_unattributed(a, _COPIES_DISAGREE) for a in every]
    return smallest


def _unattributed(access: GlobalAccess, reason: str) -> GlobalAccess:
    if access.arg_index is None:
        return access
    return GlobalAccess(access.op, access.instruction, access.nbytes, None, access.in_loop, access.address, reason)


def analyze_ptx(ptx: str, argtypes: Sequence[ArgType]) -> PtxCounts:
    """Count and attribute the global loads and stores of the first kernel in ``ptx``.

    Every access ends up either attributed to one array argument or with a
    ``reason`` it cannot be (data-dependent index or branch, several arrays, a
    loop of unknown trip count): a count is never silently guessed.
    """
    params = [int(m.group(2)) for m in _PARAM_RE.finditer(ptx)]
    expected = sum(a.n_params for a in argtypes)
    if len(params) != expected:
        raise CannotAttribute(
            f"the PTX has {len(params)} parameters but the argument types imply {expected}"
        )
    data_param: dict[int, int] = {}
    first = 0
    for index, arg in enumerate(argtypes):
        if arg.kind == "array":
            data_param[first + _ARRAY_DATA_FIELD] = index
        first += arg.n_params

    lines = _entry_lines(ptx)
    loops = _find_loops(lines)
    found, local = _scan(lines, data_param, loops)
    grid_stride = bool(loops) and any("%nctaid" in ln for ln in lines)

    straight = _distinct([a for loop, a in found if loop is None])
    regions: dict[int, list[GlobalAccess]] = {}
    for loop, a in found:
        if loop is not None:
            regions.setdefault(loop, []).append(a)
    looped: list[GlobalAccess] = []
    if regions:
        looped = _one_iteration(regions, loops)
        if not grid_stride:
            looped = [_unattributed(a, _NOT_GRID_STRIDE) for a in looped]
    return PtxCounts(
        accesses=straight + looped,
        local_accesses=local,
        instructions=[a for _, a in found],
        grid_stride=grid_stride,
    )


# --- compiling the kernel ---------------------------------------------------------


def _strip_decorators(source: str) -> str:
    tree = ast.parse(textwrap.dedent(source))
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef):
        raise CannotAttribute("expected a function definition")
    func.decorator_list = []
    return ast.unparse(func)


def _global_names(code: pytypes.CodeType) -> set[str]:
    """Names the code reads as globals (not attribute names such as the ``x`` of ``threadIdx.x``)."""
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _global_names(const)
    return names


def kernel_source(py_func: Any, _seen: set[str] | None = None) -> str:
    """Self-contained source for ``py_func`` and the device functions and constants it uses."""
    import numba

    seen = set() if _seen is None else _seen
    try:
        own = _strip_decorators(inspect.getsource(py_func))
    except (OSError, TypeError) as exc:
        raise CannotAttribute(f"cannot read the source of {py_func.__name__}: {exc}") from exc
    header: list[str] = []
    for name in sorted(_global_names(py_func.__code__)):
        if name in seen or name not in py_func.__globals__:
            continue
        seen.add(name)
        value = py_func.__globals__[name]
        inner = getattr(value, "py_func", None) or getattr(value, "fn", None)
        if isinstance(value, pytypes.ModuleType):
            header.append(f"import {value.__name__} as {name}")
        elif isinstance(value, (bool, int, float)):
            header.append(f"{name} = {value!r}")
        elif getattr(numba, name, None) is value:
            header.append(f"from numba import {name}")
        elif inner is not None and inspect.isfunction(inner):
            header.append(kernel_source(inner, seen))
            header.append(f"{name} = cuda.jit(device=True)({inner.__name__})")
        else:
            raise CannotAttribute(
                f"{py_func.__name__} uses the global `{name}` ({type(value).__name__}), "
                "which the static counter cannot carry to the compiler"
            )
    return "\n".join(header + [own])


def compile_request(request: dict[str, Any]) -> str:
    """Compile ``request["source"]``'s function ``request["name"]`` to PTX (run by :mod:`.other_backend`).

    Runs with the real ``numba.cuda`` and no GPU: device functions are compiled for
    the requested compute capability instead of asking the (absent) driver for one.
    """
    from numba import cuda
    from numba.cuda import dispatcher

    cc = tuple(request["cc"])

    class _Device:
        compute_capability = cc

    dispatcher.get_current_device = lambda: _Device()  # no driver here: device functions use this cc
    namespace: dict[str, Any] = {"cuda": cuda}
    exec(compile(request["source"], f"<kernel {request['name']}>", "exec"), namespace)
    sig = tuple(ArgType(**a).to_numba() for a in request["argtypes"])
    ptx, _ = cuda.compile_ptx(namespace[request["name"]], sig, cc=cc)
    return ptx


def cache_dir() -> str:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "three-kernels-or-one", "ptx")


@lru_cache(maxsize=256)
def _compile_in_subprocess(source: str, name: str, argtypes: tuple[ArgType, ...], cc: tuple[int, int]) -> str:
    import numba_cuda  # noqa: F401  (its version is part of the cache key)

    request = {
        "source": source,
        "name": name,
        "argtypes": [a.__dict__ for a in argtypes],
        "cc": list(cc),
    }
    key = hashlib.sha256(
        (json.dumps(request, sort_keys=True) + getattr(numba_cuda, "__version__", "")).encode()
    ).hexdigest()
    path = os.path.join(cache_dir(), key + ".ptx")
    if os.path.exists(path):
        with open(path) as f:
            return f.read()
    try:
        ptx = run_under(COMPILER, "helpers.counting.ptx:compile_request", request, timeout=300)
    except OtherBackendError as exc:
        raise CannotAttribute(f"compiling {name} to PTX failed: {exc}") from exc
    os.makedirs(cache_dir(), exist_ok=True)
    tmp = path + f".{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(ptx)
    os.replace(tmp, path)
    return ptx


def compile_ptx(kernel: Any, argtypes: Sequence[ArgType], cc: tuple[int, int] | None = None) -> str:
    """PTX for ``kernel`` (a ``@cuda.jit`` kernel or a plain function) and these argument types.

    On a GPU this is ``numba.cuda.compile_ptx`` in this process; in the simulator
    the same compiler runs in a subprocess (it needs NVVM, not a GPU).
    """
    py_func = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    cc = cc or compute_capability()
    if is_simulator():
        return _compile_in_subprocess(kernel_source(py_func), py_func.__name__, tuple(argtypes), tuple(cc))
    from numba import cuda

    try:
        ptx, _ = cuda.compile_ptx(py_func, tuple(a.to_numba() for a in argtypes), cc=cc)
    except Exception as exc:  # a typing or lowering error: the same words as the subprocess path gives
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip().replace("\n", " ")
        raise CannotAttribute(f"compiling {py_func.__name__} to PTX failed: {detail}") from exc
    return ptx


def count_global_accesses(kernel: Any, args: Sequence[Any], cc: tuple[int, int] | None = None) -> PtxCounts:
    """Static global loads/stores per thread of ``kernel`` launched with these arguments."""
    argtypes = [describe_arg(a) for a in args]
    return analyze_ptx(compile_ptx(kernel, argtypes, cc), argtypes)
