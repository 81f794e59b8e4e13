"""The values the machine computes with, in its two domains, and the rule of every opcode in both (:data:`RULES`).

Concrete rules compute on ``int64`` and ``bool`` arrays, one lane per thread; loaded and floating-point values are
:class:`Unknown`.  :class:`Ranged` holds one block's lanes for every block ``B`` of a range at once, each integer
``c0 + c1 * B`` (:class:`Affine`) or the bits the range shares (:class:`Bits`); where they differ, :class:`Split`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .parse import Instruction


@dataclass(frozen=True)
class Unknown:
    """A value the counter does not compute; ``data`` when it was loaded from memory."""

    data: bool
    what: str = ""


DATA = Unknown(True, "a value loaded from memory")
FLOAT = Unknown(False, "a floating-point value")


class Unsupported(Exception):
    """A rule cannot compute this instruction (the message names it): its result is unknown."""


class Split(Exception):
    """The range of blocks must be split: something differs inside it."""


@dataclass
class Affine:
    """``c0 + c1 * B`` in every lane, for the block index ``B``."""

    c0: np.ndarray
    c1: np.ndarray


@dataclass
class Bits:
    """A value of which only some bits are known over the range (``known`` marks them)."""

    value: np.ndarray
    known: np.ndarray


def merge(values: Sequence[Any]) -> Unknown | None:
    """The most telling unknown among ``values`` (from memory, then a named argument, then any), or None."""
    unknown = [v for v in values if isinstance(v, Unknown)]
    if not unknown:
        return None
    return next((u for u in unknown if u.data), next((u for u in unknown if "argument" in u.what), unknown[0]))


def unknown_result(ins: Instruction, sources: Sequence[Any]) -> Unknown | None:
    """The unknown an instruction's result is without computing it (a float, an unknown operand), or None."""
    if any(kind == "f" for kind, _ in ins.types):
        seen = merge(sources)
        return seen if seen is not None and (seen.data or "argument" in seen.what) else FLOAT
    return merge([*sources[2:], *sources[:2]] if ins.family == "selp" else sources)


def as_type(v: np.ndarray, kind: str, width: int) -> np.ndarray:
    """Read an integer value as the given type (signed values sign-extended, others zero-extended)."""
    if width >= 64:
        return v
    low = v & ((1 << width) - 1)
    return np.where(low >= (1 << (width - 1)), low - (1 << width), low) if kind == "s" else low


def blend(active: np.ndarray, new: Any, old: Any) -> Any:
    """``new`` in the active lanes and ``old`` in the others (zero where ``old`` is not a value of that kind)."""
    if isinstance(new, np.ndarray):
        return np.where(active, new, old if isinstance(old, np.ndarray) and old.dtype == new.dtype else False)
    if not isinstance(old, type(new)):  # a register not written before: zero, every bit known
        old = Bits(np.zeros_like(new.value), np.full_like(new.known, -1)) if isinstance(new, Bits) else \
            Affine(np.zeros_like(new.c0), np.zeros_like(new.c1))
    return type(new)(*(np.where(active, a, b) for a, b in zip(vars(new).values(), vars(old).values())))


class Ranged:
    """One block's lanes for every block in ``[b0, b1]`` at once."""

    def __init__(self, lanes: int, b0: int, b1: int) -> None:
        self.n, self.b0, self.b1, self.exact = lanes, b0, b1, b0 == b1

    def lift(self, v: np.ndarray) -> Affine:
        return Affine(v, np.zeros(self.n, dtype=np.int64))

    def const(self, v: int) -> Affine:
        return self.lift(np.full(self.n, v, dtype=np.int64))

    def at(self, v: Affine, b: int) -> np.ndarray:
        return v.c0 + v.c1 * b

    def is_const(self, v: Affine) -> bool:
        return self.exact or not v.c1.any()

    def fold(self, v: Affine) -> Affine:
        return self.lift(self.at(v, self.b0)) if self.exact and v.c1.any() else v

    def span(self, v: Any) -> tuple[np.ndarray, np.ndarray]:
        """An address as ``(c0, c1)``: ``c0 + c1 * B`` for the block index B."""
        if isinstance(v, Bits):
            raise Split
        v = self.fold(v)
        return v.c0, v.c1

    def block(self, lanes: np.ndarray) -> np.ndarray:
        """The block of each of these lanes (only asked of an exact range)."""
        return np.full(lanes.size, self.b0)

    def typed(self, v: Affine, kind: str, width: int) -> Affine:
        """``v`` read as a ``kind``/``width`` integer: exact while no value in the range wraps."""
        if width >= 64 and kind != "u":
            return v
        if self.is_const(v):
            return self.lift(as_type(self.fold(v).c0, kind if kind != "b" else "u", width))
        low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if kind == "s" else (0, (1 << min(width, 63)) - 1)
        if any(((end < low) | (end > high)).any() for end in (self.at(v, self.b0), self.at(v, self.b1))):
            raise Split
        return v

    def bits(self, v: Any) -> Bits:
        """The bits of ``v`` that are the same for every block in the range."""
        if isinstance(v, Bits):
            return v
        if self.is_const(v):
            return Bits(self.fold(v).c0, np.full(self.n, -1, dtype=np.int64))
        lo, hi = self.at(v, self.b0), self.at(v, self.b1)
        if ((lo < 0) != (hi < 0)).any():
            return Bits(lo, 0 * lo)
        differ, top = lo ^ hi, 0 * lo
        nz = differ != 0
        top[nz] = np.floor(np.log2(differ[nz].astype(np.float64))).astype(np.int64) + 1
        known = ~(np.left_shift(np.ones_like(lo), np.minimum(top + 1, 63)) - 1)  # a bit of margin for log2
        known[~nz] = -1
        return Bits(lo & known, known)

    def evaluate(self, ins: Instruction, src: list[Any], active: np.ndarray) -> Any:
        """The result over the range, or :class:`Split` where it differs in a way this domain cannot hold."""
        if any(isinstance(s, Bits) for s in src):
            return _with_bits(self, ins, src, active)
        if all(self.is_const(s) for s in src if isinstance(s, Affine)):
            result = concrete(ins, [self.fold(s).c0 if isinstance(s, Affine) else s for s in src], active)
            return result if isinstance(result, Unknown) or result.dtype == bool else self.lift(result.astype(np.int64))
        rule = RULES.get(ins.family, (None, None))[1]
        if rule is None:
            raise Split
        return rule(self, ins, src, active)


# --- concrete rules: (instruction, known operands, active lanes) -> the result --------------


def concrete(ins: Instruction, src: list[Any], active: np.ndarray) -> Any:
    """The exact result of an integer or predicate instruction, lane by lane (raises :class:`Unsupported`)."""
    if ins.family not in RULES or not ins.types:
        raise Unsupported(f"the instruction {ins.opcode}")
    return RULES[ins.family][0](ins, src, active)


def _integer(op: Callable[..., Any]) -> Callable[[Instruction, list[Any], np.ndarray], Any]:
    """A rule on the operands read as the instruction's type, its result wrapped to that type."""
    def rule(ins: Instruction, src: list[Any], active: np.ndarray) -> Any:
        kind, width = ins.types[-1]
        if kind == "pred":  # and.pred, or.pred, xor.pred, not.pred
            if ins.family not in _PREDICATE:
                raise Unsupported(f"the instruction {ins.opcode}")
            return _PREDICATE[ins.family](src)
        kind = "s" if kind == "s" else "u"
        value = op(ins, [as_type(s, kind, width) for s in src], src, active, width)
        return as_type(np.asarray(value, dtype=np.int64), kind, 2 * width if "wide" in ins.parts else width)
    return rule


def _setp(ins: Instruction, src: list[Any], active: np.ndarray) -> np.ndarray:
    kind, width = ins.types[-1]
    a, b = (as_type(s, kind, width) for s in src[:2])
    if kind in ("u", "b") and width == 64:  # (1 << 64) - 1 does not fit an int64 mask
        a, b = a.view(np.uint64), b.view(np.uint64)
    compare = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
               "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}
    if ins.parts[1] not in compare:
        raise Unsupported(f"the comparison {ins.opcode}")
    result = compare[ins.parts[1]](a, b)
    if len(ins.parts) > 2 and ins.parts[2] in ("and", "or", "xor"):  # setp.lt.and.s32 %p, a, b, %q
        result = _PREDICATE[ins.parts[2]]([result, ~src[2] if ins.operands[-1].startswith("!") else src[2]])
    return result


def _move(ins: Instruction, src: list[Any], active: np.ndarray) -> Any:
    """``mov`` and ``cvta``: the value itself, or a number made a predicate (``mov.pred %p, 0``)."""
    if ins.family == "cvta" and any(p in ins.parts for p in ("shared", "local", "const")):
        return Unknown(False, "a shared-memory address")
    if ins.types[-1][0] == "pred":
        return np.broadcast_to(np.asarray(src[0]) != 0, active.shape).copy()
    return src[0]


def _convert(read: Callable[[Any, str, int], Any], ins: Instruction, value: Any) -> Any:
    """``cvt``: ``value`` read as the source type, then as the destination type (``read``: the domain's reading)."""
    (to_kind, to_width), (kind, width) = ins.types[0], ins.types[-1]
    return read(read(value, kind, width), to_kind, to_width)


def _product(ins: Instruction, a: list[Any], src: list[Any], active: np.ndarray, width: int) -> Any:
    if "wide" in ins.parts:  # two width-bit values, 2 * width bits wide; mad.wide adds a wide value
        return a[0] * a[1] + (src[2] if ins.family == "mad" else 0)
    if "lo" in ins.parts or (width < 64 and "hi" not in ins.parts):
        return a[0] * a[1] + (a[2] if ins.family == "mad" else 0)
    if ins.family == "mad" or "hi" not in ins.parts:
        raise Unsupported(f"the instruction {ins.opcode}")
    high = [(int(x) * int(y)) >> width for x, y in zip(a[0], a[1])]
    return np.array([h & ((1 << 64) - 1) for h in high], dtype=np.uint64).view(np.int64)


def _divide(ins: Instruction, a: list[Any], src: list[Any], active: np.ndarray, width: int) -> Any:
    x, y = a[0], a[1]
    if (y[active] == 0).any():
        raise Unsupported("a division by zero")
    y = np.where(y == 0, 1, y)  # lanes that do not run this instruction
    if ins.types[-1][0] == "s":
        q = np.abs(x) // np.abs(y) * np.sign(x) * np.sign(y)
        return q if ins.family == "div" else x - q * y
    if width == 64:
        x, y = x.view(np.uint64), y.view(np.uint64)
    result = x // y if ins.family == "div" else x % y
    return result.view(np.int64) if width == 64 else result.astype(np.int64)


def _shift_right(ins: Instruction, a: list[Any], src: list[Any], active: np.ndarray, width: int) -> Any:
    if ins.types[-1][0] == "s":
        return a[0] >> np.minimum(a[1], width - 1)
    shifted = (a[0].view(np.uint64) >> np.minimum(a[1], 63).astype(np.uint64)).view(np.int64)
    return np.where(a[1] >= width, 0, shifted)


_PREDICATE: dict[str, Callable[[list[Any]], Any]] = {
    "and": lambda p: p[0] & p[1], "or": lambda p: p[0] | p[1], "xor": lambda p: p[0] ^ p[1], "not": lambda p: ~p[0],
}


# --- affine rules: (domain, instruction, operands over the range, active lanes) -> the result ----


def _with_bits(d: Ranged, ins: Instruction, src: list[Any], active: np.ndarray) -> Any:
    """``setp.eq``/``ne`` of partly known bits against zero, and bitwise operations; anything else splits."""
    if ins.family == "setp" and ins.parts[1] in ("eq", "ne") and isinstance(src[0], Bits) and \
            isinstance(src[1], Affine) and d.is_const(src[1]) and not d.fold(src[1]).c0.any():
        x = src[0]
        nonzero = (x.value & x.known) != 0
        if not (nonzero | (x.known == -1))[active].all():
            raise Split
        return nonzero if ins.parts[1] == "ne" else ~nonzero
    if ins.family in ("and", "or", "xor") and ins.types and ins.types[-1][0] in "bus":
        return _bitwise(d, ins, src, active)
    raise Split


def _bitwise(d: Ranged, ins: Instruction, src: list[Any], active: np.ndarray) -> Any:
    x, y = (d.bits(s) for s in src[:2])
    if ins.family == "and":
        ones = x.value & x.known & y.value & y.known
        zeros = (~x.value & x.known) | (~y.value & y.known)
    elif ins.family == "or":
        ones = (x.value & x.known) | (y.value & y.known)
        zeros = (~x.value & x.known) & (~y.value & y.known)
    else:
        known = x.known & y.known
        ones, zeros = (x.value ^ y.value) & known, ~(x.value ^ y.value) & known
    known = ones | zeros
    return d.lift(ones) if (known == -1).all() else Bits(ones, known)


def _monotone(d: Ranged, ins: Instruction, src: list[Any], active: np.ndarray) -> Any:
    """An operation monotone in B (shr, div, setp, abs): exact where both ends of the range agree."""
    if ins.family in ("setp", "abs") or ins.types[-1][0] != "s":
        for s in src:  # unsigned readings must not cross zero inside the range
            if isinstance(s, Affine) and ((d.at(s, d.b0) < 0) != (d.at(s, d.b1) < 0)).any():
                raise Split
    if ins.family in ("div", "shr") and not d.is_const(src[1]):
        raise Split
    lo, hi = (concrete(ins, [d.at(s, b) if isinstance(s, Affine) else s for s in src], active) for b in (d.b0, d.b1))
    if (lo[active] != hi[active]).any():
        raise Split
    return lo if lo.dtype == bool else d.lift(lo.astype(np.int64))


def _arithmetic(d: Ranged, ins: Instruction, src: list[Any], active: np.ndarray) -> Affine:
    """Sums, negation, products and shifts by a constant, and min/max where one operand wins over the range."""
    kind, width = ("s" if ins.types[-1][0] == "s" else "u"), ins.types[-1][1]
    a = [d.typed(s, kind, width) for s in src]
    family, wide = ins.family, "wide" in ins.parts
    if family in ("add", "sub", "neg", "not"):
        sign = -1 if family in ("sub", "neg", "not") else 1
        first, second = (a[0], a[1]) if family in ("add", "sub") else (d.const(-(family == "not")), a[0])
        r = Affine(first.c0 + sign * second.c0, first.c1 + sign * second.c1)
    elif family in ("mul", "mad"):
        x, y = a[0], a[1]
        if "hi" in ins.parts or not (d.is_const(x) or d.is_const(y)):
            raise Split
        r = Affine(x.c0 * y.c0, x.c0 * y.c1) if d.is_const(x) else Affine(x.c0 * y.c0, x.c1 * y.c0)
        if family == "mad":
            z = src[2] if wide else a[2]
            r = Affine(r.c0 + z.c0, r.c1 + z.c1)
    elif family == "shl":
        if not d.is_const(a[1]) or (a[1].c0 >= width).any() or (a[1].c0 < 0).any():
            raise Split
        r = Affine(a[0].c0 << a[1].c0, a[0].c1 << a[1].c0)
    else:  # min, max
        lo, hi = d.at(a[0], d.b0) - d.at(a[1], d.b0), d.at(a[0], d.b1) - d.at(a[1], d.b1)
        first_le, first_ge = (lo <= 0) & (hi <= 0), (lo >= 0) & (hi >= 0)
        if not (first_le | first_ge).all():
            raise Split
        r = blend(first_le if family == "min" else first_ge, a[0], a[1])
    return d.typed(r, kind, 2 * width) if wide else d.typed(r, kind if width < 64 else "s", width)


Rule = Callable[..., Any]
RULES: dict[str, tuple[Rule, Rule | None]] = {
    "selp": (lambda ins, src, active: np.where(src[2], src[0], src[1]),
             lambda d, ins, src, active: blend(src[2], src[0], src[1])),
    "mov": (_move, lambda d, ins, src, active: _move(ins, src, active)),
    "cvta": (_move, lambda d, ins, src, active: _move(ins, src, active)),
    "cvt": (lambda ins, src, active: _convert(as_type, ins, src[0]),
            lambda d, ins, src, active: _convert(d.typed, ins, src[0])),
    "setp": (_setp, _monotone),
    "add": (_integer(lambda ins, a, *_: a[0] + a[1]), _arithmetic),
    "sub": (_integer(lambda ins, a, *_: a[0] - a[1]), _arithmetic),
    "neg": (_integer(lambda ins, a, *_: -a[0]), _arithmetic),
    "not": (_integer(lambda ins, a, *_: ~a[0]), _arithmetic),
    "mul": (_integer(_product), _arithmetic),
    "mad": (_integer(_product), _arithmetic),
    "shl": (_integer(lambda ins, a, src, active, w: np.where(a[1] >= w, 0, a[0] << np.minimum(a[1], 63))), _arithmetic),
    "min": (_integer(lambda ins, a, *_: np.minimum(a[0], a[1])), _arithmetic),
    "max": (_integer(lambda ins, a, *_: np.maximum(a[0], a[1])), _arithmetic),
    "and": (_integer(lambda ins, a, *_: a[0] & a[1]), _bitwise),
    "or": (_integer(lambda ins, a, *_: a[0] | a[1]), _bitwise),
    "xor": (_integer(lambda ins, a, *_: a[0] ^ a[1]), _bitwise),
    "abs": (_integer(lambda ins, a, *_: np.abs(a[0])), _monotone),
    "shr": (_integer(_shift_right), _monotone),
    "div": (_integer(_divide), _monotone),
    "rem": (_integer(_divide), None),
}
"""Each opcode family's concrete rule and affine rule (``None``: a range whose operands differ splits)."""
