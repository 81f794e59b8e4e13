"""The record of lesson 11's softmax (``reductions_softmax.json``), and :class:`Measured`, the row of lessons 11-12."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers import results


@dataclass
class Measured:
    """One implementation at one size: its median GPU time and its check against the reference."""

    name: str
    median_ms: float | None
    spread_ms: float | None = None
    max_rel_err: float | None = None
    note: str = ""
    registers: int | None = None  # per thread, for a Numba kernel (None for torch or the simulator)
    threads_per_block: int | None = None


@dataclass
class SoftmaxRow:
    rows: int
    cols: int
    bytes_moved: int  # x read once and out written once
    measured: list[Measured] = field(default_factory=list)


@dataclass
class SoftmaxBench(results.Record, schema="reductions_softmax", version=1):
    copy_ceiling_gbs: float | None
    rows: list[SoftmaxRow] = field(default_factory=list)
    l2_flushed: bool = False  # True: L2 flushed before every timed repeat (and before the copy's)
