"""Follow a kernel's PTX for every thread of a launch, without its data, to count what each thread touches.

This is the static count's general engine.  The PTX is run on the host, all the
threads of a chunk at once (one NumPy lane per thread), on the *integers* only:
thread and block indices, array sizes and shapes, scalar arguments, and what the
kernel computes from them.  Values loaded from memory and floating-point values are
not computed; they are *unknown*.  So:

* every global load and store is recorded with the element it touches, exactly,
  through any guard (``i < n``, ``i == 0``, ``0 < i < n - 1``, 2-D guards in either
  order), any grid-stride or counted loop, and any device function the compiler
  inlined;
* an access whose address, or a branch whose condition, depends on an unknown value
  (``x[idx[i]]``, ``if x[i] > 0``) cannot be followed: :class:`CannotAttribute`,
  with the reason.  A count is never guessed.

The count is the same definition as the simulator's: the distinct elements each
thread reads and writes; a read of an element the thread wrote before is not a load.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod
from typing import Any, Sequence

import numpy as np

from .record import CannotAttribute, DataDependentBranch, LaunchArgs, LinkedCall, OutOfBounds

DATA_INDEX = "its address depends on a value loaded from memory (a data-dependent index such as x[idx[i]])"
DATA_BRANCH = "whether it runs depends on a value loaded from memory (a data-dependent branch such as if x[i] > 0)"

_BASE_SHIFT = 44  # array k's data pointer is (k + 1) << 44: the argument can be read back from any address
_CHUNK = 1 << 17  # threads followed at once
_MAX_STEPS = 2_000_000  # instruction groups per chunk before giving up (a loop too long to follow)


@dataclass(frozen=True)
class Unknown:
    """A value the counter does not compute; ``data`` when it was loaded from memory."""

    data: bool
    what: str = ""


_DATA = Unknown(True, "a value loaded from memory")


def _merge(values: Sequence[Any]) -> Unknown | None:
    unknown = [v for v in values if isinstance(v, Unknown)]
    if not unknown:
        return None
    # the most telling reason: a value from memory, then a named argument, then any
    return next((u for u in unknown if u.data), next((u for u in unknown if "argument" in u.what), unknown[0]))


@dataclass
class Instruction:
    line: str
    guard: str | None
    negate: bool
    opcode: str
    operands: list[str]


_LABEL = re.compile(r"^(\$?[\w$]+):$")
_PARAM = re.compile(r"_param_(\d+)\]?$")
_SPECIAL = re.compile(r"^%(tid|ntid|ctaid|nctaid)\.([xyz])$")
_INT = re.compile(r"^-?(0[xX][0-9a-fA-F]+|\d+)U?$")


def _split_operands(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse(ptx: str) -> tuple[list[Instruction], dict[str, int]]:
    """The first kernel's instructions and the instruction index of every label."""
    start = ptx.index("{", ptx.index(".entry"))
    body = ptx[start + 1 :]
    depth, end = 1, 0
    for end, ch in enumerate(body):
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            break
    instructions: list[Instruction] = []
    labels: dict[str, int] = {}
    for raw in body[:end].split(";"):
        pieces = [piece.split("//")[0].strip() for piece in raw.splitlines()]
        for k, text in enumerate(pieces):
            if not text:
                continue
            m = _LABEL.match(text)
            if m:
                labels[m.group(1)] = len(instructions)
                continue
            if text.startswith((".", "{", "}")):
                continue
            guard, negate = None, False
            if text.startswith("@"):
                guard, _, text = text.partition(" ")
                guard = guard[1:]
                if guard.startswith("!"):
                    negate, guard = True, guard[1:]
                text = text.strip()
            opcode, _, rest = text.partition(" ")
            if opcode.startswith("call"):  # a call's operands span the lines up to its ';'
                rest = " ".join([rest, *pieces[k + 1 :]])
                instructions.append(Instruction(f"{opcode} {rest}", guard, negate, opcode, _split_operands(rest)))
                break
            instructions.append(Instruction(text, guard, negate, opcode, _split_operands(rest.strip())))
    return instructions, labels


_EXTERN = re.compile(r"\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w$]+)")


def linked_functions(ptx: str) -> frozenset[str]:
    """Functions the PTX declares but does not define (``.extern .func``): code linked in later."""
    return frozenset(_EXTERN.findall(ptx))


def call_refusal(kernel: str, ins: Instruction, linked: frozenset[str]) -> LinkedCall:
    """The refusal for a ``call``: it names the callee as the PTX does, and says why it is not followed."""
    callee = next((o for o in ins.operands if not o.startswith("(")), "")
    if callee in linked:
        return LinkedCall(
            f"cannot count {kernel}: it calls `{callee}`, a function compiled from CUDA C (linked with "
            "`link=`), whose code the static counter cannot see, so it cannot say what that function reads and writes"
        )
    if callee.startswith("%"):
        return LinkedCall(f"cannot count {kernel}: it calls a function through a pointer ({callee}), "
                          "which the static counter does not follow")
    return LinkedCall(f"cannot count {kernel}: it calls `{callee}`, a device function the compiler did not "
                      "inline, which the static counter does not follow")


def _bits(opcode: str) -> tuple[str, int]:
    """The type class ("s", "u", "b", "f", "pred") and width of an opcode's last type suffix."""
    for part in reversed(opcode.split(".")):
        if part == "pred":
            return "pred", 1
        if part[:1] in "subf" and part[1:] in ("8", "16", "32", "64"):
            return part[0], int(part[1:])
    return "b", 64


def _as(v: np.ndarray, kind: str, width: int) -> np.ndarray:
    """Read an integer value as the given type (signed values sign-extended, unsigned zero-extended)."""
    if width >= 64:
        return v
    mask = (1 << width) - 1
    low = v & mask
    if kind == "s":
        return np.where(low >= (1 << (width - 1)), low - (1 << width), low)
    return low


def _types(opcode: str) -> list[tuple[str, int]]:
    found = []
    for part in opcode.split(".")[1:]:
        if part == "pred":
            found.append(("pred", 1))
        elif part[:1] in "subf" and part[1:] in ("8", "16", "32", "64"):
            found.append((part[0], int(part[1:])))
    return found


@dataclass
class _Access:
    thread: np.ndarray
    arg: int
    element: np.ndarray
    count: int
    store: bool
    load: bool
    step: int


@dataclass
class EmulatedCounts:
    """Distinct elements read and written per array argument (by index), summed over threads."""

    loads: dict[int, int] = field(default_factory=dict)
    stores: dict[int, int] = field(default_factory=dict)


class _Machine:
    def __init__(self, instructions: list[Instruction], labels: dict[str, int], launch: LaunchArgs,
                 grid: tuple[int, int, int], block: tuple[int, int, int], kernel: str) -> None:
        self.ins, self.labels, self.launch, self.kernel = instructions, labels, launch, kernel
        self.grid, self.block = grid, block
        self.linked: frozenset[str] = frozenset()  # functions the PTX declares extern (see linked_functions)
        self.params: list[Any] = []
        for k, arg in enumerate(launch.args):
            if arg.is_array:
                strides = arg.strides
                self.params += [0, 0, arg.size, arg.itemsize, (k + 1) << _BASE_SHIFT, *arg.shape, *strides]
            elif isinstance(arg.value, (bool, int, np.integer)):
                self.params.append(int(arg.value))
            else:
                self.params.append(Unknown(False, f"the floating-point argument `{arg.name}`"))

    # -- values --------------------------------------------------------------
    def operand(self, regs: dict[str, Any], text: str, n: int, special: dict[str, np.ndarray]) -> Any:
        if text in regs:
            return regs[text]
        if text in special:
            return special[text]
        if _INT.match(text):
            return np.full(n, int(text.rstrip("U"), 0), dtype=np.int64)
        if text.startswith("%"):
            m = _SPECIAL.match(text)
            if m is None:
                return Unknown(False, f"the special register {text}")
            return np.zeros(n, dtype=np.int64)  # a register read before it is written (unreachable path)
        return Unknown(False, f"the operand {text}")

    def run(self, first: int, count: int) -> list[_Access]:
        n = count
        flat = np.arange(first, first + n, dtype=np.int64)
        bx, by, bz = self.block
        gx, gy, gz = self.grid
        tpb = bx * by * bz
        tl, bl = flat % tpb, flat // tpb
        special = {
            "%tid.x": tl % bx, "%tid.y": (tl // bx) % by, "%tid.z": tl // (bx * by),
            "%ctaid.x": bl % gx, "%ctaid.y": (bl // gx) % gy, "%ctaid.z": bl // (gx * gy),
            "%ntid.x": np.full(n, bx), "%ntid.y": np.full(n, by), "%ntid.z": np.full(n, bz),
            "%nctaid.x": np.full(n, gx), "%nctaid.y": np.full(n, gy), "%nctaid.z": np.full(n, gz),
        }
        regs: dict[str, Any] = {}
        pc = np.zeros(n, dtype=np.int64)
        done = np.zeros(n, dtype=bool)
        accesses: list[_Access] = []
        steps = 0
        end = len(self.ins)
        while True:
            live = ~done
            if not live.any():
                break
            p = int(pc[live].min())
            if p >= end:
                done |= live & (pc >= end)
                continue
            mask = live & (pc == p)
            steps += 1
            if steps > _MAX_STEPS:
                raise CannotAttribute(
                    f"{self.kernel} runs a loop longer than the static counter follows "
                    f"({_MAX_STEPS} steps for {n} threads)"
                )
            ins = self.ins[p]
            active = mask
            if ins.guard is not None:
                pred = regs.get(ins.guard)
                if isinstance(pred, Unknown):
                    if ins.opcode.startswith("bra"):
                        raise self._branch_refusal(pred)
                    active = mask  # an unknown predicate on a computation: its result is unknown
                    self.execute(ins, regs, active, n, special, accesses, steps, unknown=pred)
                    pc[mask] += 1
                    continue
                if pred is None:
                    pred = np.zeros(n, dtype=bool)
                active = mask & (~pred if ins.negate else pred)
            op = ins.opcode
            if op.startswith("bra"):
                target = self.labels[ins.operands[0]]
                pc[active] = target
                pc[mask & ~active] += 1
                continue
            if op in ("ret", "exit"):
                done |= active
                pc[mask & ~active] += 1
                continue
            if op.startswith("call"):
                raise call_refusal(self.kernel, ins, self.linked)
            self.execute(ins, regs, active, n, special, accesses, steps)
            pc[mask] += 1
        return accesses

    def _branch_refusal(self, pred: Unknown) -> CannotAttribute:
        if pred.data:
            return DataDependentBranch(f"cannot count {self.kernel}: {DATA_BRANCH}")
        return CannotAttribute(f"cannot count {self.kernel}: a branch depends on {pred.what or 'a value'}, "
                               "which the static counter does not compute")

    # -- one instruction -----------------------------------------------------
    def execute(self, ins: Instruction, regs: dict[str, Any], active: np.ndarray, n: int,
                special: dict[str, np.ndarray], accesses: list[_Access], step: int,
                unknown: Unknown | None = None) -> None:
        op = ins.opcode
        parts = op.split(".")
        family = parts[0]
        ops = ins.operands
        get = lambda t: self.operand(regs, t, n, special)  # noqa: E731

        def put(dest: str, value: Any) -> None:
            if isinstance(value, Unknown):
                regs[dest] = value
                return
            old = regs.get(dest)
            if isinstance(old, Unknown) or old is None:
                if active.all():
                    regs[dest] = value
                    return
                old = np.zeros(n, dtype=value.dtype)
            regs[dest] = np.where(active, value, old)

        if family in ("ld", "st", "atom", "red"):
            space = parts[1] if len(parts) > 1 else ""
            if space == "param":
                m = _PARAM.search(ops[1].strip("[]"))
                value = self.params[int(m.group(1))] if m and int(m.group(1)) < len(self.params) else Unknown(False, ops[1])
                put(ops[0], value if isinstance(value, Unknown) else np.full(n, value, dtype=np.int64))
                return
            if space in ("global", "") or (space not in ("shared", "local", "const") and family != "ld") or space.startswith("global"):
                self.memory(ins, regs, active, n, special, accesses, step, unknown)
                return
            # shared, local or constant memory: not device-memory traffic; its values are not followed
            if family in ("ld", "atom"):
                for dest in self._dests(ops[0]):
                    regs[dest] = Unknown(True, f"a value loaded from {space} memory")
            return
        dests = ops[:1]
        if not dests or family in ("bar", "membar", "fence", "barrier", "prefetch"):
            return
        if unknown is not None:
            put(dests[0], unknown)
            return
        kinds = _types(op)
        sources = [get(o.lstrip("!")) for o in ops[1:]]
        if any(k == "f" for k, _ in kinds) and family not in ("setp", "selp", "cvt", "mov") or (
            family in ("setp",) and kinds and kinds[-1][0] == "f"
        ):
            seen = _merge(sources)
            value_f = seen if seen is not None and seen.data else Unknown(False, "a floating-point value")
            for d in dests[0].split("|"):
                put(d, value_f)
            return
        try:
            value = self.compute(family, parts, kinds, sources, ins, active)
        except _Unsupported as exc:
            value = Unknown(False, str(exc))
        if family == "setp" and "|" in dests[0]:
            first, second = dests[0].split("|")
            if isinstance(value, Unknown):
                put(first, value)
                put(second, value)
            else:
                put(first, value)
                put(second, ~value)
            return
        put(dests[0], value)

    @staticmethod
    def _dests(text: str) -> list[str]:
        return [d.strip() for d in text.strip("{}").split(",") if d.strip()]

    def compute(self, family: str, parts: list[str], kinds: list[tuple[str, int]], src: list[Any],
                ins: Instruction, active: np.ndarray) -> Any:
        bad = _merge(src)
        if family == "selp":
            if isinstance(src[2], Unknown):
                return src[2]
            if bad is not None:
                return bad
            kind, width = kinds[-1] if kinds else ("b", 64)
            if kind == "f":
                return Unknown(False, "a floating-point value")
            return np.where(src[2], src[0], src[1])
        if bad is not None:
            return bad
        if not kinds:
            raise _Unsupported(f"the instruction {ins.opcode}")
        kind, width = kinds[-1]
        if family == "mov":
            if kind == "f":
                return Unknown(False, "a floating-point value")
            if kind == "pred":  # `mov.pred %p, 0`: a number made a predicate (true where it is not zero)
                return np.broadcast_to(np.asarray(src[0]) != 0, active.shape).copy()
            return src[0]
        if family == "cvta":
            if "shared" in parts or "local" in parts or "const" in parts:
                return Unknown(False, "a shared-memory address")
            return src[0]
        if family == "cvt":
            (dk, dw), (sk, sw) = kinds[0], kinds[-1]
            if dk == "f" or sk == "f":
                return Unknown(False, "a floating-point value")
            return _as(_as(src[0], sk, sw), dk, dw)
        if family == "setp":
            cmp = parts[1]
            a, b = (_as(s, kind, width) for s in src[:2])
            if kind in ("u", "b") and width == 64:  # (1 << 64) - 1 does not fit an int64 mask
                a, b = a.view(np.uint64), b.view(np.uint64)
            elif kind in ("u", "b"):
                a, b = a & ((1 << width) - 1), b & ((1 << width) - 1)
            table = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                     "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b}
            if cmp not in table:
                raise _Unsupported(f"the comparison {ins.opcode}")
            result = table[cmp]
            combine = parts[2] if len(parts) > 2 and parts[2] in ("and", "or", "xor") else None
            if combine:
                other = src[2]
                if ins.operands[-1].startswith("!"):
                    other = ~other
                result = {"and": result & other, "or": result | other, "xor": result ^ other}[combine]
            return result
        if kind == "pred":
            if family == "and":
                return src[0] & src[1]
            if family == "or":
                return src[0] | src[1]
            if family == "xor":
                return src[0] ^ src[1]
            if family == "not":
                return ~src[0]
            raise _Unsupported(f"the instruction {ins.opcode}")
        rk = "s" if kind == "s" else "u"
        if family in ("mul", "mad") and "wide" in parts:
            a, b = _as(src[0], rk, width), _as(src[1], rk, width)
            value = a * b + (src[2] if family == "mad" else 0)
            return value
        a = [_as(s, rk if kind != "b" else "u", width) for s in src]
        if family == "add":
            value = a[0] + a[1]
        elif family == "sub":
            value = a[0] - a[1]
        elif family in ("mul", "mad") and ("lo" in parts or width < 64 and "hi" not in parts):
            value = a[0] * a[1] + (a[2] if family == "mad" else 0)
        elif family == "mul" and "hi" in parts:
            value = np.array([(int(x) * int(y)) >> width for x, y in zip(a[0], a[1])], dtype=object)
            value = np.array([int(v) & ((1 << 64) - 1) for v in value], dtype=np.uint64).view(np.int64)
        elif family in ("div", "rem"):
            if (a[1][active] == 0).any():
                raise _Unsupported("a division by zero")
            a[1] = np.where(a[1] == 0, 1, a[1])  # lanes that do not run this instruction
            if kind == "s":
                q = np.abs(a[0]) // np.abs(a[1]) * np.sign(a[0]) * np.sign(a[1])
            else:
                x, y = (v.view(np.uint64) if width == 64 else v for v in a[:2])
                q = (x // y).astype(np.int64) if width < 64 else (x // y).view(np.int64)
                if family == "rem":
                    return ((x % y).view(np.int64) if width == 64 else (x % y).astype(np.int64))
            value = q if family == "div" else a[0] - q * a[1]
        elif family == "neg":
            value = -a[0]
        elif family == "abs":
            value = np.abs(a[0])
        elif family == "min":
            value = np.minimum(a[0], a[1])
        elif family == "max":
            value = np.maximum(a[0], a[1])
        elif family == "and":
            value = a[0] & a[1]
        elif family == "or":
            value = a[0] | a[1]
        elif family == "xor":
            value = a[0] ^ a[1]
        elif family == "not":
            value = ~a[0]
        elif family == "shl":
            value = np.where(a[1] >= width, 0, a[0] << np.minimum(a[1], 63))
        elif family == "shr":
            shift = np.minimum(a[1], width - 1 if kind == "s" else 63)
            if kind == "s":
                value = _as(src[0], "s", width) >> shift
            else:
                x = _as(src[0], "u", width)
                value = np.where(a[1] >= width, 0, (x.view(np.uint64) >> shift.astype(np.uint64)).view(np.int64))
        else:
            raise _Unsupported(f"the instruction {ins.opcode}")
        return _as(np.asarray(value, dtype=np.int64), "s" if kind == "s" or width == 64 else "u", width)

    def memory(self, ins: Instruction, regs: dict[str, Any], active: np.ndarray, n: int,
               special: dict[str, np.ndarray], accesses: list[_Access], step: int, unknown: Unknown | None) -> None:
        family = ins.opcode.split(".")[0]
        address_text = next(o for o in ins.operands if o.startswith("["))
        inner = address_text.strip("[]").replace(" ", "")
        base, _, offset = inner.partition("+")
        value = self.operand(regs, base, n, special)
        if unknown is not None:
            raise DataDependentBranch(f"cannot count {self.kernel}: {DATA_BRANCH}")
        if isinstance(value, Unknown):
            if value.data:
                raise CannotAttribute(f"cannot count {self.kernel}: a global memory access: {DATA_INDEX}")
            raise CannotAttribute(
                f"cannot count {self.kernel}: the address of a global memory access depends on {value.what}"
            )
        address = value + (int(offset, 0) if offset else 0)
        nbytes = _access_bytes(ins.opcode)
        if family in ("ld", "atom"):
            for dest in self._dests(ins.operands[0]):
                regs[dest] = _DATA
        if not active.any():
            return
        where = address[active]
        arg = (where >> _BASE_SHIFT) - 1
        if (arg < 0).any() or (arg >= len(self.launch.args)).any() or len(set(arg.tolist())) != 1:
            raise CannotAttribute(
                f"cannot count {self.kernel}: a global memory access whose address is not inside one array argument"
            )
        k = int(arg[0])
        info = self.launch.args[k]
        if not info.is_array:
            raise CannotAttribute(f"cannot count {self.kernel}: an access through the scalar argument {info.name}")
        offset_bytes = where - ((k + 1) << _BASE_SHIFT)
        element = offset_bytes // info.itemsize
        count = max(1, nbytes // info.itemsize)
        outside = (element < 0) | (element + count > info.size)
        if outside.any():
            threads = np.flatnonzero(active)[outside]
            raise OutOfBounds(
                f"{self.kernel}: a thread would access {info.name}[{int(element[outside][0])}], outside "
                f"the array (size {info.size}); {len(threads)} thread(s) of this launch do so "
                "(a bounds guard is missing or wrong)"
            )
        threads = np.flatnonzero(active)
        load = family in ("ld", "atom", "red")
        store = family in ("st", "atom", "red")
        accesses.append(_Access(threads, k, element, count, store, load, step))


class _Unsupported(Exception):
    pass


def _access_bytes(opcode: str) -> int:
    width, size = 1, 4
    for p in opcode.split("."):
        if p in ("v2", "v4", "v8"):
            width = int(p[1:])
        elif p[:1] in "bfsu" and p[1:] in ("8", "16", "32", "64", "128"):
            size = int(p[1:]) // 8
    return width * size


def _distinct(accesses: list[_Access], n_args: int) -> EmulatedCounts:
    """Per argument: distinct (thread, element) loads not preceded by a store of the same element, and stores."""
    result = EmulatedCounts()
    for k in range(n_args):
        mine = [a for a in accesses if a.arg == k]
        if not mine:
            continue
        thread, element, step, is_store, is_load = [], [], [], [], []
        for a in mine:
            for j in range(a.count):
                thread.append(a.thread)
                element.append(a.element + j)
                step.append(np.full(a.thread.size, a.step, dtype=np.int64))
                is_store.append(np.full(a.thread.size, a.store))
                is_load.append(np.full(a.thread.size, a.load))
        t, e, s = np.concatenate(thread), np.concatenate(element), np.concatenate(step)
        st, ld = np.concatenate(is_store), np.concatenate(is_load)
        order = np.lexsort((s, e, t))
        t, e, s, st, ld = t[order], e[order], s[order], st[order], ld[order]
        starts = np.flatnonzero(np.r_[True, (t[1:] != t[:-1]) | (e[1:] != e[:-1])])
        big = np.iinfo(np.int64).max
        first_store = np.minimum.reduceat(np.where(st, s, big), starts)
        first_load = np.minimum.reduceat(np.where(ld, s, big), starts)
        # an atomic both loads and stores at one step: its load comes first
        loads = int(np.count_nonzero((first_load < big) & (first_load <= first_store)))
        stores = int(np.count_nonzero(first_store < big))
        result.loads[k] = loads
        result.stores[k] = stores
    return result


def emulate(ptx: str, launch: LaunchArgs, grid: Sequence[int], block: Sequence[int], kernel: str) -> EmulatedCounts:
    """Distinct elements each thread of the launch reads and writes, per array argument, summed over threads."""
    return emulate_ranges(ptx, launch, grid, block, kernel)


def emulate_threads(ptx: str, launch: LaunchArgs, grid: Sequence[int], block: Sequence[int],
                    kernel: str) -> EmulatedCounts:
    """The same count, following every thread one by one (slow; the reference the fast way is tested against)."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    instructions, labels = parse(ptx)
    machine = _Machine(instructions, labels, launch, g[:3], b[:3], kernel)
    machine.linked = linked_functions(ptx)
    threads = prod(g) * prod(b)
    tpb = prod(b)
    chunk = max(tpb, (_CHUNK // tpb) * tpb)  # whole blocks per chunk
    total = EmulatedCounts()
    for first in range(0, threads, chunk):
        counts = _distinct(machine.run(first, min(chunk, threads - first)), len(launch.args))
        for k, v in counts.loads.items():
            total.loads[k] = total.loads.get(k, 0) + v
        for k, v in counts.stores.items():
            total.stores[k] = total.stores.get(k, 0) + v
    return total


# --- the same, for a range of blocks at once ----------------------------------------------
#
# Most kernels treat all blocks alike up to the block index: `i = blockIdx.x * 256 +
# threadIdx.x` is an affine function of the block index.  So one block's lanes are
# followed with every integer held as ``c0 + c1 * B`` (B the block index, ranging over
# [B0, B1]).  Where a branch, an address or a non-affine operation would differ inside
# the range (the last, partly guarded block, say), the range is split in two and each
# half followed again; a range of one block is fully concrete, so this always ends.
# The count is exactly that of following every block one by one.


class _Split(Exception):
    """The range of blocks must be split: something differs inside it."""


@dataclass
class _Aff:
    c0: np.ndarray
    c1: np.ndarray


@dataclass
class _Bits:
    """A value of which only some bits are known over the range (``known`` marks them)."""

    value: np.ndarray
    known: np.ndarray


_MONOTONE = {"shr", "div", "setp", "abs"}
_AFFINE = {"add", "sub", "neg", "not", "mul", "mad", "shl", "mov", "cvt", "cvta", "selp", "min", "max"}


class _RangeMachine(_Machine):
    """Follows one block's lanes for every block in a range [B0, B1] at once."""

    def setup(self, b0: int, b1: int) -> None:
        self.b0, self.b1 = b0, b1

    def _at(self, v: _Aff, b: int) -> np.ndarray:
        return v.c0 + v.c1 * b

    def _const(self, v: _Aff) -> bool:
        return self.b0 == self.b1 or not v.c1.any()

    def _fold(self, v: _Aff) -> _Aff:
        if self.b0 == self.b1 and v.c1.any():
            return _Aff(v.c0 + v.c1 * self.b0, np.zeros_like(v.c1))
        return v

    def _typed(self, v: _Aff, kind: str, width: int) -> _Aff:
        """``v`` read as a ``kind``/``width`` integer: exact while no value in the range wraps."""
        if width >= 64 and kind != "u":
            return v
        if self._const(v):
            return _Aff(_as(self._fold(v).c0, kind if kind != "b" else "u", width), np.zeros_like(v.c0))
        lo, hi = self._at(v, self.b0), self._at(v, self.b1)
        if kind == "s":
            low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
        else:
            low, high = 0, (1 << min(width, 63)) - 1
        if (lo < low).any() or (hi < low).any() or (lo > high).any() or (hi > high).any():
            raise _Split
        return v

    def _bits(self, v: Any) -> _Bits:
        """The bits of ``v`` that are the same for every block in the range."""
        if isinstance(v, _Bits):
            return v
        if self._const(v):
            return _Bits(self._fold(v).c0, np.full(v.c0.shape, -1, dtype=np.int64))
        lo, hi = self._at(v, self.b0), self._at(v, self.b1)
        if ((lo < 0) != (hi < 0)).any():
            return _Bits(lo, np.zeros_like(lo))
        differ = lo ^ hi
        top = np.zeros_like(lo)
        nz = differ != 0
        top[nz] = np.floor(np.log2(differ[nz].astype(np.float64))).astype(np.int64) + 1
        top = np.minimum(top + 1, 63)  # one bit of margin against rounding in log2
        known = ~((np.left_shift(np.ones_like(lo), top)) - 1)
        known[~nz] = -1
        return _Bits(lo & known, known)

    def run_range(self, b0: int, b1: int) -> list[_Access]:
        self.setup(b0, b1)
        bx, by, bz = self.block
        gx, gy, gz = self.grid
        n = bx * by * bz
        tl = np.arange(n, dtype=np.int64)
        zero = np.zeros(n, dtype=np.int64)
        row = b0 // gx  # the range lies inside one row of blocks (same y and z)
        const = lambda v: _Aff(np.full(n, v, dtype=np.int64), zero.copy())  # noqa: E731
        special = {
            "%tid.x": _Aff(tl % bx, zero), "%tid.y": _Aff((tl // bx) % by, zero), "%tid.z": _Aff(tl // (bx * by), zero),
            "%ctaid.x": _Aff(np.full(n, -row * gx, dtype=np.int64), np.ones(n, dtype=np.int64)),
            "%ctaid.y": const(row % gy), "%ctaid.z": const(row // gy),
            "%ntid.x": const(bx), "%ntid.y": const(by), "%ntid.z": const(bz),
            "%nctaid.x": const(gx), "%nctaid.y": const(gy), "%nctaid.z": const(gz),
        }
        if b0 == b1:
            special["%ctaid.x"] = const(b0 - row * gx)
        regs: dict[str, Any] = {}
        pc = np.zeros(n, dtype=np.int64)
        done = np.zeros(n, dtype=bool)
        accesses: list[_Access] = []
        steps = 0
        end = len(self.ins)
        self._n = n
        while True:
            live = ~done
            if not live.any():
                break
            p = int(pc[live].min())
            if p >= end:
                done |= live & (pc >= end)
                continue
            mask = live & (pc == p)
            steps += 1
            if steps > _MAX_STEPS:
                raise CannotAttribute(
                    f"{self.kernel} runs a loop longer than the static counter follows ({_MAX_STEPS} steps)"
                )
            ins = self.ins[p]
            active = mask
            if ins.guard is not None:
                pred = regs.get(ins.guard)
                if isinstance(pred, Unknown):
                    if ins.opcode.startswith("bra"):
                        raise self._branch_refusal(pred)
                    self.step_one(ins, regs, mask, special, accesses, steps, unknown=pred)
                    pc[mask] += 1
                    continue
                if pred is None:
                    pred = np.zeros(n, dtype=bool)
                active = mask & (~pred if ins.negate else pred)
            op = ins.opcode
            if op.startswith("bra"):
                pc[active] = self.labels[ins.operands[0]]
                pc[mask & ~active] += 1
                continue
            if op in ("ret", "exit"):
                done |= active
                pc[mask & ~active] += 1
                continue
            if op.startswith("call"):
                raise call_refusal(self.kernel, ins, self.linked)
            self.step_one(ins, regs, active, special, accesses, steps)
            pc[mask] += 1
        return accesses

    def value(self, regs: dict[str, Any], text: str, special: dict[str, Any]) -> Any:
        n = self._n
        if text in regs:
            return regs[text]
        if text in special:
            return special[text]
        if _INT.match(text):
            return _Aff(np.full(n, int(text.rstrip("U"), 0), dtype=np.int64), np.zeros(n, dtype=np.int64))
        if text.startswith("%"):
            if _SPECIAL.match(text) is None and not text.startswith(("%r", "%p", "%f", "%rd", "%fd", "%rs")):
                return Unknown(False, f"the special register {text}")
            return _Aff(np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
        return Unknown(False, f"the operand {text}")

    def step_one(self, ins: Instruction, regs: dict[str, Any], active: np.ndarray, special: dict[str, Any],
                 accesses: list[_Access], step: int, unknown: Unknown | None = None) -> None:
        op = ins.opcode
        parts = op.split(".")
        family = parts[0]
        ops = ins.operands
        n = self._n

        def put(dest: str, value: Any) -> None:
            if isinstance(value, Unknown):
                regs[dest] = value
                return
            old = regs.get(dest)
            if active.all() or old is None or isinstance(old, Unknown):
                if not active.all() and isinstance(value, _Aff):
                    value = _Aff(np.where(active, value.c0, 0), np.where(active, value.c1, 0))
                elif not active.all():
                    value = value & active
                regs[dest] = value
                return
            if isinstance(value, _Aff):
                if not isinstance(old, _Aff):
                    old = _Aff(np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
                regs[dest] = _Aff(np.where(active, value.c0, old.c0), np.where(active, value.c1, old.c1))
            else:
                if not isinstance(old, np.ndarray) or old.dtype != bool:
                    old = np.zeros(n, dtype=bool)
                regs[dest] = np.where(active, value, old)

        if family in ("ld", "st", "atom", "red"):
            space = parts[1] if len(parts) > 1 else ""
            if space == "param":
                m = _PARAM.search(ops[1].strip("[]"))
                value = self.params[int(m.group(1))] if m and int(m.group(1)) < len(self.params) else Unknown(False, ops[1])
                if not isinstance(value, Unknown):
                    value = _Aff(np.full(n, value, dtype=np.int64), np.zeros(n, dtype=np.int64))
                put(ops[0], value)
                return
            if space in ("shared", "local", "const"):
                if family in ("ld", "atom"):
                    for dest in self._dests(ops[0]):
                        regs[dest] = Unknown(True, f"a value loaded from {space} memory")
                return
            self.memory_range(ins, regs, active, special, accesses, step, unknown)
            return
        if not ops or family in ("bar", "membar", "fence", "barrier", "prefetch"):
            return
        dests = ops[0].split("|")
        if unknown is not None:
            for d in dests:
                put(d, unknown)
            return
        kinds = _types(op)
        sources = [self.value(regs, o.lstrip("!"), special) for o in ops[1:]]
        is_float = any(k == "f" for k, _ in kinds)
        if is_float and (family not in ("selp", "mov", "cvt") or family == "setp" or kinds[-1][0] == "f"
                         or (family == "cvt" and kinds[0][0] == "f")):
            seen = _merge(sources)
            result = seen if seen is not None and (seen.data or "argument" in seen.what) else \
                Unknown(False, "a floating-point value")
            for d in dests:
                put(d, result)
            return
        bad = _merge(sources if family != "selp" else sources[2:] + sources[:2])
        if bad is not None:
            for d in dests:
                put(d, bad)
            return
        try:
            value = self.affine(family, parts, kinds, sources, ins, active)
        except _Unsupported as exc:
            value = Unknown(False, str(exc))
        if len(dests) == 2 and not isinstance(value, Unknown):
            put(dests[0], value)
            put(dests[1], ~value)
            return
        for d in dests:
            put(d, value)

    def _concrete(self, family: str, parts: list[str], kinds: list[tuple[str, int]], src: list[Any],
                  ins: Instruction, active: np.ndarray, b: int) -> Any:
        vals = [self._at(s, b) if isinstance(s, _Aff) else s for s in src]
        return _Machine.compute(self, family, parts, kinds, vals, ins, active)

    def affine(self, family: str, parts: list[str], kinds: list[tuple[str, int]], src: list[Any],
               ins: Instruction, active: np.ndarray) -> Any:
        n = self._n
        zero = np.zeros(n, dtype=np.int64)
        if any(isinstance(s, _Bits) for s in src):
            if family == "setp" and parts[1] in ("eq", "ne") and isinstance(src[0], _Bits) and \
                    isinstance(src[1], _Aff) and self._const(src[1]) and not self._fold(src[1]).c0.any():
                x = src[0]
                nonzero = (x.value & x.known) != 0
                if not (nonzero | (x.known == -1))[active].all():
                    raise _Split
                return nonzero if parts[1] == "ne" else ~nonzero
            if family in ("and", "or", "xor"):
                pass
            else:
                raise _Split
        ints = [s for s in src if isinstance(s, _Aff)]
        if all(self._const(s) for s in ints) and not any(isinstance(s, _Bits) for s in src):
            result = self._concrete(family, parts, kinds, [self._fold(s) if isinstance(s, _Aff) else s for s in src],
                                    ins, active, 0)
            if isinstance(result, Unknown):
                return result
            return result if result.dtype == bool else _Aff(result.astype(np.int64), zero.copy())
        kind, width = kinds[-1] if kinds else ("b", 64)
        rk = "s" if kind == "s" else "u"
        if family == "selp":
            p = src[2]
            a, b = src[0], src[1]
            return _Aff(np.where(p, a.c0, b.c0), np.where(p, a.c1, b.c1))
        if family in ("mov", "cvta"):
            if "shared" in parts or "local" in parts:
                return Unknown(False, "a shared-memory address")
            return src[0]
        if family == "cvt":
            (dk, dw), (sk, sw) = kinds[0], kinds[-1]
            return self._typed(self._typed(src[0], sk, sw), dk, dw)
        if family in ("add", "sub", "mul", "mad", "shl", "neg", "not", "min", "max"):
            wide = "wide" in parts
            a = [self._typed(s, rk, width) for s in src]
            if family == "add":
                r = _Aff(a[0].c0 + a[1].c0, a[0].c1 + a[1].c1)
            elif family == "sub":
                r = _Aff(a[0].c0 - a[1].c0, a[0].c1 - a[1].c1)
            elif family == "neg":
                r = _Aff(-a[0].c0, -a[0].c1)
            elif family == "not":
                r = _Aff(-a[0].c0 - 1, -a[0].c1)
            elif family in ("mul", "mad"):
                if "hi" in parts:
                    raise _Split
                x, y = a[0], a[1]
                if self._const(x):
                    r = _Aff(x.c0 * y.c0, x.c0 * y.c1)
                elif self._const(y):
                    r = _Aff(x.c0 * y.c0, x.c1 * y.c0)
                else:
                    raise _Split
                if family == "mad":
                    z = a[2] if not wide else src[2]
                    r = _Aff(r.c0 + z.c0, r.c1 + z.c1)
            elif family == "shl":
                if not self._const(a[1]) or (a[1].c0 >= width).any() or (a[1].c0 < 0).any():
                    raise _Split
                f = np.left_shift(np.ones(n, dtype=np.int64), a[1].c0)
                r = _Aff(a[0].c0 * f, a[0].c1 * f)
            else:  # min / max: exact where one operand wins over the whole range
                d = _Aff(a[0].c0 - a[1].c0, a[0].c1 - a[1].c1)
                lo, hi = self._at(d, self.b0), self._at(d, self.b1)
                first_le = (lo <= 0) & (hi <= 0)
                first_ge = (lo >= 0) & (hi >= 0)
                if not (first_le | first_ge).all():
                    raise _Split
                pick_first = first_le if family == "min" else first_ge
                r = _Aff(np.where(pick_first, a[0].c0, a[1].c0), np.where(pick_first, a[0].c1, a[1].c1))
            if wide:
                return self._typed(r, rk, 2 * width)
            return self._typed(r, rk if width < 64 else "s", width)
        if family in ("and", "or", "xor") and kind in ("b", "u", "s"):
            x, y = (self._bits(s) for s in src[:2])
            if family == "and":
                ones = x.value & x.known & y.value & y.known
                zeros = (~x.value & x.known) | (~y.value & y.known)
            elif family == "or":
                ones = (x.value & x.known) | (y.value & y.known)
                zeros = (~x.value & x.known) & (~y.value & y.known)
            else:
                known = x.known & y.known
                ones, zeros = (x.value ^ y.value) & known, ~(x.value ^ y.value) & known
            known = ones | zeros
            if (known == -1).all():
                return _Aff(ones, zero.copy())
            return _Bits(ones, known)
        if family in _MONOTONE:
            if family in ("setp", "abs") or rk == "u":
                for s in ints:  # unsigned readings must not cross zero inside the range
                    if ((self._at(s, self.b0) < 0) != (self._at(s, self.b1) < 0)).any():
                        raise _Split
            if family in ("div",) and not self._const(src[1]):
                raise _Split
            if family == "shr" and not self._const(src[1]):
                raise _Split
            lo = self._concrete(family, parts, kinds, src, ins, active, self.b0)
            hi = self._concrete(family, parts, kinds, src, ins, active, self.b1)
            if (lo[active] != hi[active]).any():
                raise _Split
            return lo if lo.dtype == bool else _Aff(lo.astype(np.int64), zero.copy())
        raise _Split

    def memory_range(self, ins: Instruction, regs: dict[str, Any], active: np.ndarray, special: dict[str, Any],
                     accesses: list[_Access], step: int, unknown: Unknown | None) -> None:
        family = ins.opcode.split(".")[0]
        inner = next(o for o in ins.operands if o.startswith("[")).strip("[]").replace(" ", "")
        base, _, offset = inner.partition("+")
        value = self.value(regs, base, special)
        if unknown is not None:
            raise DataDependentBranch(f"cannot count {self.kernel}: {DATA_BRANCH}")
        if isinstance(value, Unknown):
            if value.data:
                raise CannotAttribute(f"cannot count {self.kernel}: a global memory access: {DATA_INDEX}")
            raise CannotAttribute(
                f"cannot count {self.kernel}: the address of a global memory access depends on {value.what}"
            )
        if family in ("ld", "atom"):
            for dest in self._dests(ins.operands[0]):
                regs[dest] = _DATA
        if not active.any():
            return
        value = self._fold(value)
        c0 = value.c0[active] + (int(offset, 0) if offset else 0)
        c1 = value.c1[active]
        lo, hi = c0 + c1 * self.b0, c0 + c1 * self.b1
        arg_lo, arg_hi = (lo >> _BASE_SHIFT) - 1, (hi >> _BASE_SHIFT) - 1
        if (arg_lo != arg_hi).any() or len(set(arg_lo.tolist())) != 1:
            if self.b0 != self.b1:
                raise _Split
            raise CannotAttribute(
                f"cannot count {self.kernel}: a global memory access whose address is not inside one array argument"
            )
        k = int(arg_lo[0])
        if k < 0 or k >= len(self.launch.args):
            raise CannotAttribute(
                f"cannot count {self.kernel}: a global memory access whose address is not inside one array argument"
            )
        info = self.launch.args[k]
        if not info.is_array:
            raise CannotAttribute(f"cannot count {self.kernel}: an access through the scalar argument {info.name}")
        o0 = c0 - ((k + 1) << _BASE_SHIFT)
        if (c1 % info.itemsize).any():
            raise _Split
        e0, e1 = o0 // info.itemsize, c1 // info.itemsize
        count = max(1, _access_bytes(ins.opcode) // info.itemsize)
        first, last = e0 + e1 * self.b0, e0 + e1 * self.b1
        bad = (np.minimum(first, last) < 0) | (np.maximum(first, last) + count > info.size)
        if bad.any():
            if self.b0 != self.b1:
                raise _Split
            element = int(first[bad][0])
            raise OutOfBounds(
                f"{self.kernel}: a thread would access {info.name}[{element}], outside the array "
                f"(size {info.size}); {int(bad.sum())} thread(s) of block {self.b0} do so "
                "(a bounds guard is missing or wrong)"
            )
        access = _Access(np.flatnonzero(active), k, e0, count, family in ("st", "atom", "red"),
                         family in ("ld", "atom", "red"), step)
        access.slope = e1  # type: ignore[attr-defined]
        accesses.append(access)


def _range_counts(accesses: list[_Access], n_args: int, blocks: int) -> EmulatedCounts:
    """Distinct per-thread counts over a range of ``blocks`` blocks (the same for every block in it)."""
    by_arg: dict[int, set[int]] = {}
    for a in accesses:
        by_arg.setdefault(a.arg, set()).update(np.unique(a.slope).tolist())  # type: ignore[attr-defined]
    if blocks > 1 and any(len(v) > 1 for v in by_arg.values()):
        raise _Split  # elements of one array move differently with the block: they may meet
    counts = _distinct(accesses, n_args)
    return EmulatedCounts({k: v * blocks for k, v in counts.loads.items()},
                          {k: v * blocks for k, v in counts.stores.items()})


def emulate_ranges(ptx: str, launch: LaunchArgs, grid: Sequence[int], block: Sequence[int], kernel: str,
                   max_ranges: int = 200_000) -> EmulatedCounts:
    """:func:`emulate`'s count, found block range by block range (fast when blocks behave alike)."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    instructions, labels = parse(ptx)
    machine = _RangeMachine(instructions, labels, launch, g[:3], b[:3], kernel)
    machine.linked = linked_functions(ptx)
    gx = g[0]
    rows = g[1] * g[2]
    todo = [(r * gx, r * gx + gx - 1) for r in reversed(range(rows))]
    total = EmulatedCounts()
    followed = 0
    while todo:
        b0, b1 = todo.pop()
        followed += 1
        if followed > max_ranges:
            raise CannotAttribute(f"{kernel}: its blocks differ in too many ways for the static counter to follow")
        try:
            counts = _range_counts(machine.run_range(b0, b1), len(launch.args), b1 - b0 + 1)
        except _Split:
            if b0 == b1:
                raise
            mid = (b0 + b1) // 2
            todo += [(mid + 1, b1), (b0, mid)]
            continue
        for k, v in counts.loads.items():
            total.loads[k] = total.loads.get(k, 0) + v
        for k, v in counts.stores.items():
            total.stores[k] = total.stores.get(k, 0) + v
    return total
