"""Read a kernel's compiled code (PTX) and count its global-memory loads and stores.

This is the *static* count: it looks at the instructions the compiler emitted, not
at what ran.  Each ``ld.global``/``st.global`` is attributed to the array argument
whose data pointer its address was computed from, by following registers forward
from the ``ld.param`` that fetched that pointer.

The PTX comes from ``numba.cuda.compile_ptx``, which needs NVVM but no GPU.  In the
CUDA simulator ``numba.cuda`` has no compiler, so the kernel's source is compiled in
a short-lived subprocess that imports the real ``numba.cuda`` instead.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import types as pytypes
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

from .backend import compute_capability, is_simulator

# Parameters an array argument is flattened into by numba-cuda's data model:
# meminfo, parent, nitems, itemsize, data, shape[ndim], strides[ndim].
_ARRAY_DATA_FIELD = 4


class CannotAttribute(Exception):
    """The static counter cannot say which array an access touches, or cannot compile the kernel."""


@dataclass(frozen=True)
class ArgType:
    """A picklable description of one kernel argument's Numba type."""

    kind: str  # "array" or "scalar"
    dtype: str
    ndim: int = 0
    layout: str = "C"

    @property
    def n_params(self) -> int:
        return 5 + 2 * self.ndim if self.kind == "array" else 1

    def to_numba(self) -> Any:
        from numba import types

        dtype = getattr(types, self.dtype)
        return types.Array(dtype, self.ndim, self.layout) if self.kind == "array" else dtype


def describe_arg(value: Any) -> ArgType:
    """The :class:`ArgType` Numba would infer for a kernel argument."""
    from numba import typeof
    from numba.core import types

    if is_simulator() and hasattr(value, "_numba_type_"):
        ty = value._numba_type_
    else:
        ty = typeof(value)
    if isinstance(ty, types.Array):
        return ArgType("array", str(ty.dtype), ty.ndim, ty.layout)
    if isinstance(ty, (types.Integer, types.Float, types.Boolean)):
        return ArgType("scalar", str(ty))
    raise CannotAttribute(f"cannot attribute accesses for an argument of type {ty}")


@dataclass
class GlobalAccess:
    """One global-memory instruction in the PTX."""

    op: str  # "load" or "store"
    instruction: str
    nbytes: int
    arg_index: int | None  # None: the address could not be traced to one array
    in_loop: bool


@dataclass
class PtxCounts:
    """Global loads and stores per thread (per loop iteration inside loops), by argument."""

    accesses: list[GlobalAccess] = field(default_factory=list)
    local_accesses: int = 0

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


_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}
_PARAM_RE = re.compile(r"\.param\s+\.\w+\s+(\S+?)_param_(\d+)")
_REG_RE = re.compile(r"%[a-z]+\d*")
_LABEL_RE = re.compile(r"^(\$?[\w$]+):")
_BRANCH_RE = re.compile(r"\bbra(?:\.uni)?\s+(\$?[\w$]+);")


def _access_bytes(opcode: str) -> int:
    parts = opcode.split(".")
    width = 1
    size = 4
    for p in parts:
        if p in ("v2", "v4", "v8"):
            width = int(p[1:])
        elif p[:1] in "bfsu" and p[1:] in _TYPE_BYTES:
            size = _TYPE_BYTES[p[1:]]
    return width * size


def analyze_ptx(ptx: str, argtypes: Sequence[ArgType]) -> PtxCounts:
    """Count and attribute the global loads and stores of the first kernel in ``ptx``."""
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

    body = ptx[ptx.index("{", ptx.index(".entry")) :]
    lines = [ln.strip() for ln in body.splitlines()]
    label_line = {m.group(1): i for i, ln in enumerate(lines) if (m := _LABEL_RE.match(ln))}
    loops = [
        (label_line[m.group(1)], i)
        for i, ln in enumerate(lines)
        if (m := _BRANCH_RE.search(ln)) and m.group(1) in label_line and label_line[m.group(1)] < i
    ]

    taint: dict[str, frozenset[int]] = {}
    counts = PtxCounts()
    for _ in range(3):  # loops can carry a pointer around a back edge: iterate to a fixed point
        counts = PtxCounts()
        for i, line in enumerate(lines):
            if not line or line.startswith(("//", ".", "{", "}")) or _LABEL_RE.match(line):
                continue
            instr = line.split(";")[0]
            if instr.startswith("@"):
                instr = instr.split(None, 1)[1] if " " in instr else ""
            opcode, _, operands = instr.partition(" ")
            regs = _REG_RE.findall(operands)
            in_loop = any(start <= i <= end for start, end in loops)
            if opcode.startswith("ld.param"):
                m = re.search(r"_param_(\d+)\]", operands)
                if m and regs and int(m.group(1)) in data_param:
                    taint[regs[0]] = frozenset({data_param[int(m.group(1))]})
                continue
            family, _, rest = opcode.partition(".")
            space = rest.split(".")[0]
            if family in ("ld", "st") and space == "local":
                counts.local_accesses += 1
                continue
            # Global and generic addresses both count: numba emits ld.global, but a
            # generic ld/st through a global pointer still reaches device memory.
            if family in ("ld", "st", "atom", "red") and space not in ("param", "shared", "const", "local"):
                address = re.search(r"\[([^\]]+)\]", operands)
                addr_regs = _REG_RE.findall(address.group(1)) if address else []
                owners = frozenset().union(*(taint.get(r, frozenset()) for r in addr_regs))
                owner = next(iter(owners)) if len(owners) == 1 else None
                nbytes = _access_bytes(opcode)
                ops = {"ld": ["load"], "st": ["store"], "atom": ["load", "store"], "red": ["load", "store"]}
                for op in ops[opcode.split(".")[0]]:
                    counts.accesses.append(GlobalAccess(op, opcode, nbytes, owner, in_loop))
                continue
            if regs:  # any other instruction: the destination inherits its sources' pointers
                dest, sources = regs[0], regs[1:]
                merged = frozenset().union(*(taint.get(r, frozenset()) for r in sources))
                if merged:
                    taint[dest] = taint.get(dest, frozenset()) | merged
    return counts


# --- compiling the kernel ---------------------------------------------------------


def _strip_decorators(source: str) -> str:
    tree = ast.parse(textwrap.dedent(source))
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef):
        raise CannotAttribute("expected a function definition")
    func.decorator_list = []
    return ast.unparse(func)


def _global_names(code: pytypes.CodeType) -> set[str]:
    names = set(code.co_names)
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


_WORKER = """
import json, sys
request = json.load(sys.stdin)
from numba import cuda, types
namespace = {"cuda": cuda}
exec(request["source"], namespace)
fn = namespace[request["name"]]
def build(a):
    dtype = getattr(types, a["dtype"])
    return types.Array(dtype, a["ndim"], a["layout"]) if a["kind"] == "array" else dtype
sig = tuple(build(a) for a in request["argtypes"])
ptx, _ = cuda.compile_ptx(fn, sig, cc=tuple(request["cc"]))
sys.stdout.write(ptx)
"""


def _cache_dir() -> str:
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
    path = os.path.join(_cache_dir(), key + ".ptx")
    if os.path.exists(path):
        with open(path) as f:
            return f.read()
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    done = subprocess.run(
        [sys.executable, "-c", _WORKER],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise CannotAttribute(f"compiling {name} to PTX failed: {last[0]}")
    os.makedirs(_cache_dir(), exist_ok=True)
    tmp = path + f".{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(done.stdout)
    os.replace(tmp, path)
    return done.stdout


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

    ptx, _ = cuda.compile_ptx(py_func, tuple(a.to_numba() for a in argtypes), cc=cc)
    return ptx


def count_global_accesses(kernel: Any, args: Sequence[Any], cc: tuple[int, int] | None = None) -> PtxCounts:
    """Static global loads/stores per thread of ``kernel`` launched with these arguments."""
    argtypes = [describe_arg(a) for a in args]
    return analyze_ptx(compile_ptx(kernel, argtypes, cc), argtypes)
