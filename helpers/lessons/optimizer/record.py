"""The record of lesson 14 (``reductions_adamw.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers import results
from helpers.lessons.softmax.record import Measured


@dataclass
class AdamWRow:
    case: str  # "one tensor" or "list"
    tensors: int
    elements: int
    bytes_fused: int  # 28 B per element
    measured: list[Measured] = field(default_factory=list)


@dataclass
class AdamWBench(results.Record, schema="reductions_adamw", version=1):
    rows: list[AdamWRow] = field(default_factory=list)
