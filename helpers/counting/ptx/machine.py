"""Follow a kernel's PTX for every thread of a launch, without its data, to count what each thread touches.

The PTX runs on the host, one NumPy lane per thread, on the integers only (:mod:`.values`): every global load and
store is recorded with the element it touches; an address or a branch that depends on a loaded or floating-point
value (``x[idx[i]]``, ``if x[i] > 0``) raises :class:`CannotAttribute`.  :func:`emulate` follows ranges of blocks
at once, halving a range where its blocks differ.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..record import (DATA_INDEX, CannotAttribute, DataDependentBranch, ElementCounts, LaunchArgs, LinkedCall,
                      OutOfBounds, array_layout)
from .parse import Instruction, Program, access_bytes, parse
from .values import DATA, Affine, Ranged, Split, Unknown, Unsupported, blend, unknown_result

BASE_SHIFT = 44  # array k's data pointer is (k + 1) << 44: the argument can be read back from any address
MAX_STEPS = 2_000_000  # instruction groups per range before giving up (a loop too long to follow)
MAX_RANGES = 200_000  # block ranges per launch before giving up (blocks that differ in too many ways)
_MEMORY = ("ld", "st", "atom", "red")
_NO_RESULT = ("bar", "membar", "fence", "barrier", "prefetch")
_INT = re.compile(r"^-?(0[xX][0-9a-fA-F]+|\d+)U?$")
_GENERAL = ("%r", "%p", "%f")  # general registers: zero where read before written (a lane that did not run)


@dataclass
class Access:
    """One load or store instruction as the lanes that ran it made it."""

    lanes: np.ndarray
    arg: int
    element: np.ndarray  # the first element each lane touches (for the block index 0 in a range)
    slope: np.ndarray  # elements further per block of the range
    count: int  # elements one access moves (4 for ld.global.v4.f32 of float32)
    store: bool
    load: bool
    step: int


def launch_params(launch: LaunchArgs, ptx_params: int) -> list[Any]:
    """The kernel's parameters as the PTX numbers them: array ``k`` flattened, its data at ``(k + 1) << BASE_SHIFT``."""
    # the count of .param declarations includes any linked function's, which the machine refuses by name
    layout = array_layout(ptx_params, [len(a.shape) if a.is_array else None for a in launch.args], refuse=False)
    params: list[Any] = []
    for k, arg in enumerate(launch.args):
        if arg.is_array:
            params += layout.params((k + 1) << BASE_SHIFT, arg.size, arg.itemsize, arg.shape, arg.strides)
        elif isinstance(arg.value, (bool, int, np.integer)):
            params.append(int(arg.value))
        else:
            params.append(Unknown(False, f"the floating-point argument `{arg.name}`"))
    return params


def specials(domain: Ranged, thread: np.ndarray, ctaid: Sequence[Any], grid: Sequence[int],
             block: Sequence[int]) -> dict[str, Any]:
    """``%tid``, ``%ntid``, ``%ctaid`` and ``%nctaid`` for lanes of thread-in-block index ``thread``."""
    bx, by, _ = block
    tid = (thread % bx, (thread // bx) % by, thread // (bx * by))
    found: dict[str, Any] = {}
    for axis, t, c, nt, nc in zip("xyz", tid, ctaid, block, grid):
        found.update({f"%tid.{axis}": domain.lift(t), f"%ctaid.{axis}": c,
                      f"%ntid.{axis}": domain.const(nt), f"%nctaid.{axis}": domain.const(nc)})
    return found


class Machine:
    """The lanes of a launch following one program: lane program counters, guards, and the step limit."""

    def __init__(self, program: Program, launch: LaunchArgs, kernel: str, domain: Ranged,
                 special: dict[str, Any]) -> None:
        self.program, self.launch, self.kernel, self.domain, self.special = program, launch, kernel, domain, special
        self.params = launch_params(launch, program.n_params)
        self.regs: dict[str, Any] = {}
        self.accesses: list[Access] = []

    def refuse(self, why: str) -> CannotAttribute:
        return CannotAttribute(f"cannot count {self.kernel}: {why}")

    def read(self, text: str) -> Any:
        if text in self.regs:
            return self.regs[text]
        if text in self.special:
            return self.special[text]
        if _INT.match(text):
            return self.domain.const(int(text.rstrip("U"), 0))
        if text.startswith(_GENERAL):
            return self.domain.const(0)
        if text.startswith("%"):
            return Unknown(False, f"the special register {text}")
        return Unknown(False, f"the operand {text}")

    def put(self, dest: str, value: Any, active: np.ndarray) -> None:
        self.regs[dest] = value if isinstance(value, Unknown) or active.all() else \
            blend(active, value, self.regs.get(dest))

    def run(self) -> list[Access]:
        """Step the lanes at the lowest program counter together until every lane has returned."""
        instructions, n = self.program.instructions, self.domain.n
        pc, done = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
        steps = 0
        while (live := ~done).any():
            p = int(pc[live].min())
            if p >= len(instructions):
                done |= live & (pc >= len(instructions))
                continue
            mask = live & (pc == p)
            steps += 1
            if steps > MAX_STEPS:
                raise CannotAttribute(f"{self.kernel} runs a loop longer than the static counter follows "
                                      f"({MAX_STEPS} steps)")
            ins = instructions[p]
            active = self.guarded(ins, mask, steps)
            if active is None:
                pc[mask] += 1
            elif ins.family == "bra":
                pc[active] = self.program.labels[ins.operands[0]]
                pc[mask & ~active] += 1
            elif ins.family in ("ret", "exit"):
                done |= active
                pc[mask & ~active] += 1
            elif ins.family == "call":
                callee = next((o for o in ins.operands if not o.startswith("(")), "")
                raise LinkedCall.of(self.kernel, callee, callee in self.program.linked)
            else:
                self.execute(ins, active, steps)
                pc[mask] += 1
        return self.accesses

    def guarded(self, ins: Instruction, mask: np.ndarray, step: int) -> np.ndarray | None:
        """The lanes that run ``ins``; None once an instruction under an unknown guard has been executed."""
        if ins.guard is None:
            return mask
        pred = self.regs.get(ins.guard)
        if isinstance(pred, Unknown):
            if ins.family == "bra":
                if pred.data:
                    raise DataDependentBranch.of(self.kernel)
                raise self.refuse(f"a branch depends on {pred.what or 'a value'}, which the static counter does not "
                                  "compute")
            self.execute(ins, mask, step, unknown=pred)  # its result is unknown
            return None
        if pred is None:
            return np.zeros_like(mask)
        return mask & (~pred if ins.negate else pred)

    def execute(self, ins: Instruction, active: np.ndarray, step: int, unknown: Unknown | None = None) -> None:
        """One instruction other than a branch, a return or a call, for the ``active`` lanes."""
        if ins.family in _MEMORY:
            if ins.space == "param":
                self.put(ins.operands[0], self.param(ins), active)
            elif ins.space in ("shared", "local", "const"):  # not device memory; its values are not followed
                if ins.family in ("ld", "atom"):
                    loaded = Unknown(True, f"a value loaded from {ins.space} memory")
                    self.regs.update(dict.fromkeys(ins.dests(), loaded))
            else:
                self.memory(ins, active, step, unknown)
            return
        if not ins.operands or ins.family in _NO_RESULT:
            return
        value: Any = unknown
        if value is None:
            sources = [self.read(o.lstrip("!")) for o in ins.operands[1:]]
            value = unknown_result(ins, sources)
        if value is None:
            try:
                value = self.domain.evaluate(ins, sources, active)
            except Unsupported as exc:
                value = Unknown(False, str(exc))
        dests = ins.operands[0].split("|")  # setp's two: the predicate and its negation
        negated = len(dests) == 2 and not isinstance(value, Unknown)
        for d, v in zip(dests, [value, ~value] if negated else [value] * len(dests)):
            self.put(d, v, active)

    def param(self, ins: Instruction) -> Any:
        k = ins.param()
        value = self.params[k] if k is not None and k < len(self.params) else Unknown(False, ins.operands[-1])
        return value if isinstance(value, Unknown) else self.domain.const(value)

    def memory(self, ins: Instruction, active: np.ndarray, step: int, unknown: Unknown | None) -> None:
        """A global (or generic) load, store or atomic: recorded with the elements each lane touches."""
        base, _, offset = ins.address().partition("+")
        value = self.read(base)
        if unknown is not None:
            raise DataDependentBranch.of(self.kernel)
        if isinstance(value, Unknown):
            raise self.refuse(f"a global memory access: {DATA_INDEX}" if value.data
                              else f"the address of a global memory access depends on {value.what}")
        if ins.family in ("ld", "atom"):
            self.regs.update(dict.fromkeys(ins.dests(), DATA))
        if not active.any():
            return
        c0, c1 = self.domain.span(value)
        c0, c1 = c0[active] + (int(offset, 0) if offset else 0), c1[active]
        k = self.argument(c0 + c1 * self.domain.b0, c0 + c1 * self.domain.b1)
        info = self.launch.args[k]
        if (c1 % info.itemsize).any():
            raise Split
        element, slope = (c0 - ((k + 1) << BASE_SHIFT)) // info.itemsize, c1 // info.itemsize
        count = max(1, access_bytes(ins.opcode) // info.itemsize)
        first, last = element + slope * self.domain.b0, element + slope * self.domain.b1
        outside = (np.minimum(first, last) < 0) | (np.maximum(first, last) + count > info.size)
        if outside.any():
            if not self.domain.exact:
                raise Split
            blocks = self.domain.block(np.flatnonzero(active)[outside])  # the tests' exact domain spans blocks
            raise OutOfBounds.of(self.kernel, info.name, int(first[outside][0]), info.size,
                                 int((blocks == blocks[0]).sum()), int(blocks[0]))
        self.accesses.append(Access(np.flatnonzero(active), k, element, slope, count,
                                    ins.family in ("st", "atom", "red"), ins.family in ("ld", "atom", "red"), step))

    def argument(self, lo: np.ndarray, hi: np.ndarray) -> int:
        """The array argument every lane's address lies in, at both ends of the range."""
        arg_lo, arg_hi = (lo >> BASE_SHIFT) - 1, (hi >> BASE_SHIFT) - 1
        k = int(arg_lo[0])
        varies = bool((arg_lo != arg_hi).any() or (arg_lo != k).any())
        if varies and not self.domain.exact:
            raise Split
        if varies or not 0 <= k < len(self.launch.args):
            raise self.refuse("a global memory access whose address is not inside one array argument")
        if not self.launch.args[k].is_array:
            raise self.refuse(f"an access through the scalar argument {self.launch.args[k].name}")
        return k


def distinct_counts(accesses: list[Access], n_args: int) -> ElementCounts:
    """Per argument: distinct (lane, element) loads not preceded by a store of the same element, and stores."""
    result = ElementCounts()
    for k in range(n_args):
        mine = [a for a in accesses if a.arg == k]
        if not mine:
            continue
        pieces = [(a.lanes, a.element + j, np.full(a.lanes.size, a.step), np.full(a.lanes.size, a.store),
                   np.full(a.lanes.size, a.load)) for a in mine for j in range(a.count)]
        t, e, s, st, ld = (np.concatenate(column) for column in zip(*pieces))
        order = np.lexsort((s, e, t))
        t, e, s, st, ld = t[order], e[order], s[order], st[order], ld[order]
        starts = np.flatnonzero(np.r_[True, (t[1:] != t[:-1]) | (e[1:] != e[:-1])])
        never = np.iinfo(np.int64).max
        first_store = np.minimum.reduceat(np.where(st, s, never), starts)
        first_load = np.minimum.reduceat(np.where(ld, s, never), starts)
        # an atomic both loads and stores at one step: its load comes first
        result.loads[k] = int(np.count_nonzero((first_load < never) & (first_load <= first_store)))
        result.stores[k] = int(np.count_nonzero(first_store < never))
    return result


def dims3(dims: Sequence[int]) -> tuple[int, int, int]:
    """A grid or block size as three dimensions (missing ones are 1)."""
    x, y, z = (*dims, 1, 1, 1)[:3]
    return x, y, z


def follow_range(program: Program, launch: LaunchArgs, kernel: str, grid: tuple[int, int, int],
                 block: tuple[int, int, int], b0: int, b1: int) -> ElementCounts:
    """The count of each block of ``b0..b1`` (one row of the grid), followed as one; :class:`Split` if they differ."""
    n, gx = block[0] * block[1] * block[2], grid[0]
    domain = Ranged(n, b0, b1)
    row = b0 // gx  # the range lies inside one row of blocks (same y and z)
    x = domain.const(b0 - row * gx) if b0 == b1 else \
        Affine(np.full(n, -row * gx, dtype=np.int64), np.ones(n, dtype=np.int64))
    ctaid = (x, domain.const(row % grid[1]), domain.const(row // grid[1]))
    accesses = Machine(program, launch, kernel, domain, specials(domain, np.arange(n), ctaid, grid, block)).run()
    slopes: dict[int, set[int]] = {}
    for a in accesses:
        slopes.setdefault(a.arg, set()).update(np.unique(a.slope).tolist())
    if b1 > b0 and any(len(v) > 1 for v in slopes.values()):
        raise Split  # elements of one array move differently with the block: they may meet
    return distinct_counts(accesses, len(launch.args))


def emulate(ptx: str, launch: LaunchArgs, grid: Sequence[int], block: Sequence[int], kernel: str) -> ElementCounts:
    """Distinct elements each thread reads and writes, per array argument, summed over the launch's threads."""
    g, b = dims3(grid), dims3(block)
    program = parse(ptx)
    todo = [(r * g[0], r * g[0] + g[0] - 1) for r in reversed(range(g[1] * g[2]))]
    total = ElementCounts()
    followed = 0
    while todo:
        b0, b1 = todo.pop()
        followed += 1
        if followed > MAX_RANGES:
            raise CannotAttribute(f"{kernel}: its blocks differ in too many ways for the static counter to follow")
        try:
            total.add(follow_range(program, launch, kernel, g, b, b0, b1), b1 - b0 + 1)
        except Split:
            if b0 == b1:
                raise
            mid = (b0 + b1) // 2
            todo += [(mid + 1, b1), (b0, mid)]
    return total
