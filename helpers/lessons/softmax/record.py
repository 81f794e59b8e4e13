"""The record of lesson 11's softmax (``reductions_softmax.json``), and :class:`Measured`, the row of lessons 11-12."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from helpers import results

T = TypeVar("T")


HOST_TIME_IN_IT = "host time in it (GPU idle before each call)"
"""A :class:`Measured` note: the time was too long to hide the host's cost behind a hold, so it includes it."""


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

    @property
    def host_time_in_it(self) -> bool:
        """Whether this time includes the host's cost of issuing the work (:data:`HOST_TIME_IN_IT`)."""
        return HOST_TIME_IN_IT in self.note


def fastest(measured: Sequence[Measured], pattern: str,
            max_error: float | None = None) -> tuple[re.Match[str], float] | None:
    """The fastest timed entry whose whole name matches ``pattern`` (a regular expression): its match and time.
    With ``max_error``, only entries whose recorded error is at most that take part."""
    timed = [(m.median_ms, found) for m in measured
             if m.median_ms is not None and (found := re.fullmatch(pattern, m.name)) is not None
             and (max_error is None or (m.max_rel_err is not None and m.max_rel_err <= max_error))]
    if not timed:
        return None
    ms, found = min(timed, key=lambda pair: pair[0])
    return found, ms


def committed_fastest(cls: type[results.Record], pattern: str, key: Callable[[Any], int],
                      weight: Callable[[Any], int] = lambda row: 0,
                      max_error: float | None = None) -> dict[int, re.Match[str]]:
    """For each ``key(row)`` of the committed ``cls`` record (the H200's), the match of its fastest entry named by
    ``pattern`` (within ``max_error``, if given); where rows share a key, the one of most ``weight`` decides.
    Empty without the record."""
    try:
        bench = results.load(cls)
    except results.ResultError:
        return {}
    best: dict[int, tuple[int, re.Match[str]]] = {}
    for row in bench.rows:  # type: ignore[attr-defined]
        found = fastest(row.measured, pattern, max_error)
        if found and (key(row) not in best or weight(row) >= best[key(row)][0]):
            best[key(row)] = (weight(row), found[0])
    return {k: match for k, (_, match) in best.items()}


def nearest(by_size: dict[int, T], size: int) -> T | None:
    """The value at the size nearest ``size`` on a log scale (a tie goes to the larger); None when empty."""
    if not by_size:
        return None
    return by_size[min(by_size, key=lambda s: (abs(math.log(s / size)), -s))]


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
