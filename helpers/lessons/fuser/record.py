"""The record of notebook 06's comparison (``fuser_vs_torch_compile.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers.results import Record


@dataclass
class Contender:
    """One implementation at one size: correct or not, GPU time, and host time per call."""

    equals_numpy: bool
    gpu_ms: float
    host_us: float
    max_abs_diff: float = 0.0
    host_iqr_us: float | None = None  # the host times' interquartile range (None: not kept, before 2026-12-06)


@dataclass
class FuserRow:
    n: int
    bytes_moved: int
    contenders: dict[str, Contender]
    fuser_equals_hand_written: bool


@dataclass(kw_only=True)
class FuserVsCompile(Record, schema="fuser_vs_torch_compile", version=2):
    expression: str
    rows: list[FuserRow] = field(default_factory=list)
    timing: str = ("GPU time: CUDA events, launches queued behind a hold kernel (host cost hidden), median of 50; "
                   "host time: perf_counter per call, the GPU idle before each, median and IQR of 51 calls")
