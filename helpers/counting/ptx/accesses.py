"""The global-memory loads and stores one thread's code holds, by argument: the instruction view a lesson shows.

Each ``ld.global``/``st.global`` is attributed to the array whose data pointer (``ld.param``) its address came from.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from itertools import permutations
from typing import Any, Sequence

from ..record import DATA_BRANCH, DATA_INDEX, ArgType, CannotAttribute, array_layout
from .compile import compile_ptx, describe_arg
from .parse import Instruction, Program, access_bytes, parse

_DATA = -1
"""Taint marker: the value was loaded from global memory (so an address using it is data-dependent)."""
_REG = re.compile(r"%[a-z]+\d*")
_OPS = {"ld": ["load"], "st": ["store"], "atom": ["load", "store"], "red": ["load", "store"]}

_NOT_GRID_STRIDE = ("it sits in a loop that is not a grid-stride loop, so the static counter cannot know "
                    "how many times it runs")
_NESTED = "it sits in nested loops, whose trip counts the static counter cannot know"
_COPIES_DISAGREE = "the unrolled copies of its loop access different arrays, so one iteration cannot be told apart"


@dataclass
class GlobalAccess:
    """One global-memory access as the static count counts it."""

    op: str  # "load" or "store"
    nbytes: int
    arg_index: int | None  # None: cannot attribute (see ``reason``)
    in_loop: bool
    address: str = ""  # the address operand with register versions, e.g. "%rd16@1+4"
    reason: str | None = None  # why it cannot be attributed, when arg_index is None


@dataclass
class PtxCounts:
    """The *distinct* global loads and stores per thread (per source iteration of a grid-stride loop), by argument,
    as the simulator counts them; ``instructions``: every ``ld``/``st``."""

    accesses: list[GlobalAccess] = field(default_factory=list)
    instructions: list[GlobalAccess] = field(default_factory=list)

    def loads(self, arg_index: int | None = None) -> int:
        return sum(1 for a in self.accesses if a.op == "load" and (arg_index is None or a.arg_index == arg_index))

    def stores(self, arg_index: int | None = None) -> int:
        return sum(1 for a in self.accesses if a.op == "store" and (arg_index is None or a.arg_index == arg_index))

    def bytes(self, op: str, arg_index: int) -> int:
        return sum(a.nbytes for a in self.accesses if a.op == op and a.arg_index == arg_index)

    @property
    def unattributed(self) -> list[GlobalAccess]:
        return [a for a in self.accesses if a.arg_index is None]

    def reasons(self) -> list[str]:
        """Why some accesses cannot be attributed (empty when every access is attributed)."""
        return list(dict.fromkeys(a.reason for a in self.unattributed if a.reason))


def _owner(owners: frozenset[int]) -> tuple[int | None, str | None]:
    """The array an address belongs to, or ``None`` and the reason."""
    if _DATA in owners:
        return None, DATA_INDEX
    if len(owners) == 1:
        return next(iter(owners)), None
    if not owners:
        return None, "its address is not computed from any array argument's data pointer"
    names = ", ".join(f"argument {i}" for i in sorted(owners))
    return None, f"its address is computed from several arrays ({names})"


class _Scan:
    """One pass over the instructions, carrying what each register was computed from."""

    def __init__(self, taint: dict[str, frozenset[int]], data_param: dict[int, int], loops: list[tuple[int, int]]):
        self.taint, self.data_param, self.loops = taint, data_param, loops
        self.version: dict[str, int] = {}
        self.found: list[tuple[int | None, GlobalAccess]] = []
        self.after_data_branch = False

    def owners(self, regs: list[str]) -> frozenset[int]:
        return frozenset().union(*(self.taint.get(r, frozenset()) for r in regs))

    def written(self, reg: str, taint: frozenset[int] | None = None) -> None:
        if taint is not None:
            self.taint[reg] = taint
        self.version[reg] = self.version.get(reg, 0) + 1

    def step(self, i: int, ins: Instruction) -> None:
        guard = [ins.guard] if ins.guard else []
        by_data = _DATA in self.owners(guard)
        regs = _REG.findall(", ".join(ins.operands))
        if ins.family == "bra":
            self.after_data_branch = self.after_data_branch or by_data
        elif ins.opcode.startswith("ld.param"):
            k = ins.param()
            if regs:
                self.written(regs[0], frozenset({self.data_param[k]}) if k in self.data_param else None)
        elif ins.family in ("ld", "st") and ins.space == "local":
            pass  # a spilled register: neither device memory nor a value that is followed
        elif ins.family in _OPS and ins.space not in ("param", "shared", "const", "local"):  # global, or generic
            self.access(i, ins, regs, by_data)
        elif regs:  # any other instruction: the destination inherits its sources' taint
            merged = self.owners(regs[1:] + guard)
            self.written(regs[0], self.taint.get(regs[0], frozenset()) | merged if merged else None)

    def access(self, i: int, ins: Instruction, regs: list[str], by_data: bool) -> None:
        text = ins.address()
        addr_regs = _REG.findall(text)
        owner, reason = _owner(self.owners(addr_regs))
        if owner is not None and (self.after_data_branch or by_data):
            owner, reason = None, DATA_BRANCH
        key = _REG.sub(lambda m: f"{m.group(0)}@{self.version.get(m.group(0), 0)}", text)
        loop = next((k for k, (start, end) in enumerate(self.loops) if start <= i <= end), None)
        for op in _OPS[ins.family]:
            access = GlobalAccess(op, access_bytes(ins.opcode), owner, loop is not None, key, reason)
            self.found.append((loop, access))
        if ins.family in ("ld", "atom") and regs and regs[0] not in addr_regs:
            self.written(regs[0], frozenset({_DATA}))


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


def _signature(accesses: list[GlobalAccess]) -> Counter[tuple[str, int | None, int]]:
    return Counter((a.op, a.arg_index, a.nbytes) for a in accesses)


def _unattributed(accesses: list[GlobalAccess], reason: str) -> list[GlobalAccess]:
    return [a if a.arg_index is None else replace(a, arg_index=None, reason=reason) for a in accesses]


def _one_iteration(regions: dict[int, list[GlobalAccess]], loops: list[tuple[int, int]]) -> list[GlobalAccess]:
    """The accesses of one source iteration, from the loop copies the compiler made: an unrolled grid-stride loop
    is a remainder loop (one copy) and a main loop (k copies), each a whole multiple of the smallest."""
    nested = any(outer[0] <= inner[0] and inner[1] <= outer[1] for outer, inner in permutations(loops, 2))
    every = [a for group in regions.values() for a in group]
    if nested:
        return _unattributed(every, _NESTED)
    distinct = {k: _distinct(v) for k, v in regions.items()}
    smallest = min(distinct.values(), key=len)
    base = _signature(smallest)
    for group in distinct.values():
        factor = len(group) // max(len(smallest), 1)
        if _signature(group) != Counter({key: factor * n for key, n in base.items()}):
            return _unattributed(every, _COPIES_DISAGREE)
    return smallest


def analyze_ptx(ptx: str, argtypes: Sequence[ArgType]) -> PtxCounts:
    """Count and attribute the global loads and stores of the first kernel in ``ptx``: every access is attributed
    to one array argument, or has the ``reason`` it cannot be (a count is never silently guessed)."""
    program = parse(ptx)
    ndims = [a.ndim if a.kind == "array" else None for a in argtypes]
    layout = array_layout(program.n_params, ndims)
    data_param: dict[int, int] = {}
    first = 0
    for index, ndim in enumerate(ndims):
        if ndim is not None:
            data_param.update({first + k: index for k in layout.data})
        first += layout.n_params(ndim)
    loops = program.loops()
    taint: dict[str, frozenset[int]] = {}
    for _ in range(3):  # loops carry values around a back edge: iterate to a fixed point
        scan = _Scan(taint, data_param, loops)
        for i, ins in enumerate(program.instructions):
            scan.step(i, ins)
    grid_stride = bool(loops) and any("%nctaid" in o for ins in program.instructions for o in ins.operands)
    regions: dict[int, list[GlobalAccess]] = {}
    for loop, a in scan.found:
        if loop is not None:
            regions.setdefault(loop, []).append(a)
    looped = _one_iteration(regions, loops) if regions else []
    if not grid_stride:
        looped = _unattributed(looped, _NOT_GRID_STRIDE)
    return PtxCounts(_distinct([a for loop, a in scan.found if loop is None]) + looped, [a for _, a in scan.found])


def count_global_accesses(kernel: Any, args: Sequence[Any], cc: tuple[int, int] | None = None) -> PtxCounts:
    """Static global loads/stores per thread of ``kernel`` launched with these arguments."""
    argtypes = [describe_arg(a) for a in args]
    return analyze_ptx(compile_ptx(kernel, argtypes, cc), argtypes)
