"""Read PTX text once: the first kernel's instructions (opcode, types, operands, guard) and its labels."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LABEL = re.compile(r"^(\$?[\w$]+):$")
_EXTERN = re.compile(r"\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w$]+)")
_PARAM_DECL = re.compile(r"\.param\s+\.\w+\s+(\S+?)_param_(\d+)")
_PARAM_USE = re.compile(r"_param_(\d+)\]$")
_WIDTHS = ("8", "16", "32", "64")


@dataclass
class Instruction:
    """One PTX instruction: ``@!%p1 ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd5+16];``."""

    opcode: str  # "ld.global.v4.f32"
    operands: list[str]  # ["{%f1, %f2, %f3, %f4}", "[%rd5+16]"]: the destination first
    guard: str | None = None  # the predicate register that guards it ("%p1"), if any
    negate: bool = False  # the guard is "@!%p1"
    parts: list[str] = field(init=False)  # ["ld", "global", "v4", "f32"]
    types: list[tuple[str, int]] = field(init=False)  # every type suffix: [("f", 32)]; ("pred", 1) for .pred

    def __post_init__(self) -> None:
        self.parts = self.opcode.split(".")
        self.types = [("pred", 1) if p == "pred" else (p[0], int(p[1:])) for p in self.parts[1:]
                      if p == "pred" or (p[:1] in "subf" and p[1:] in _WIDTHS)]

    @property
    def family(self) -> str:
        return self.parts[0]

    @property
    def space(self) -> str:
        """The state space of a load or store ("global", "param", "shared", ...; a type for a generic one)."""
        return self.parts[1] if len(self.parts) > 1 else ""

    def dests(self) -> list[str]:
        """The registers the first operand names (``{%f1, %f2}`` for a vector load)."""
        return [d.strip() for d in self.operands[0].strip("{}").split(",") if d.strip()]

    def param(self) -> int | None:
        """The kernel parameter ``k`` the last operand reads (``[name_param_k]``), or None."""
        found = _PARAM_USE.search(self.operands[-1]) if self.operands else None
        return None if found is None else int(found.group(1))

    def address(self) -> str:
        """The address operand without brackets or spaces, e.g. ``%rd5+16`` (empty if there is none)."""
        return next((o for o in self.operands if o.startswith("[")), "").strip("[]").replace(" ", "")


@dataclass
class Program:
    """The first kernel of a PTX text."""

    instructions: list[Instruction]
    labels: dict[str, int]  # label -> index of the instruction after it
    linked: frozenset[str]  # functions the PTX declares but does not define (``.extern .func``): linked in later
    n_params: int  # the ``.param`` declarations named ``..._param_<k>``

    def loops(self) -> list[tuple[int, int]]:
        """(first instruction, back edge) of every loop: a branch to a label at or above it."""
        return [(self.labels[ins.operands[0]], i) for i, ins in enumerate(self.instructions)
                if ins.family == "bra" and ins.operands and self.labels.get(ins.operands[0], i + 1) <= i]


def access_bytes(opcode: str) -> int:
    """Bytes one execution of a load/store opcode moves, e.g. 16 for ``ld.global.v4.f32``."""
    width, size = 1, 4
    for p in opcode.split("."):
        if p in ("v2", "v4", "v8"):
            width = int(p[1:])
        elif p[:1] in "bfsu" and p[1:] in (*_WIDTHS, "128"):
            size = int(p[1:]) // 8
    return width * size


def split_operands(text: str) -> list[str]:
    """Operands separated by the commas outside brackets, braces and parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch in "[{(") - (ch in "]})")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def _body(ptx: str) -> str:
    """The text between the first ``.entry``'s braces."""
    body = ptx[ptx.index("{", ptx.index(".entry")) + 1 :]
    depth = 1
    for end, ch in enumerate(body):
        depth += (ch == "{") - (ch == "}")
        if depth == 0:
            return body[:end]
    return body


def _instruction(text: str) -> Instruction:
    guard, negate = None, False
    if text.startswith("@"):
        guard, text = text[1:].split(None, 1)
        negate = guard.startswith("!")
        guard = guard.lstrip("!")
    opcode, _, rest = text.partition(" ")
    return Instruction(opcode, split_operands(rest.strip()), guard, negate)


def parse(ptx: str) -> Program:
    """The first kernel's instructions, labels, linked functions and parameter count."""
    instructions: list[Instruction] = []
    labels: dict[str, int] = {}
    for raw in _body(ptx).split(";"):
        pieces = [piece.split("//")[0].strip() for piece in raw.splitlines()]
        for k, text in enumerate(pieces):
            if (m := _LABEL.match(text)) is not None:
                labels[m.group(1)] = len(instructions)
            elif text and not text.startswith((".", "{", "}")):
                ins = _instruction(text)
                if ins.family == "call":  # a call's operands span the lines up to its ';'
                    instructions.append(_instruction(" ".join([text, *pieces[k + 1 :]])))
                    break
                instructions.append(ins)
    return Program(instructions, labels, frozenset(_EXTERN.findall(ptx)), len(_PARAM_DECL.findall(ptx)))
