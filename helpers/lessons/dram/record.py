"""The records of lesson 04's hardware count (``ncu_dram.json``, ``ncu_corpus.json``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from helpers.results import Record


@dataclass
class KernelCounters:
    """One profiled kernel launch as ncu reported it."""

    id: int
    kernel: str  # the Python function's name, e.g. "add_kernel"
    full_name: str
    grid: str
    block: str
    dram_bytes_read: float
    dram_bytes_write: float

    @property
    def threads(self) -> int:
        """Threads launched, from the grid and block sizes ncu prints as "(x, y, z)"."""
        total = 1
        for v in re.findall(r"\d+", self.grid) + re.findall(r"\d+", self.block):
            total *= int(v)
        return total


@dataclass
class DramLaunch:
    """One launch: the ledger's bytes beside ncu's DRAM bytes, and the 3% check where it applies."""

    n: int
    kernel: str
    threads: int
    ledger_bytes_read: int
    ledger_bytes_written: int
    ncu_dram_bytes_read: float
    ncu_dram_bytes_written: float
    ratio: float  # ncu (read + written) / ledger (read + written)
    arrays_at_least_4x_l2: bool
    within_3_percent: bool | None  # None: arrays too small (or L2 size unknown) for the check


@dataclass
class NcuMode:
    """Every launch profiled under one cache policy (or why none was)."""

    command: str = ""
    launches: list[DramLaunch] = field(default_factory=list)
    ncu: list[KernelCounters] = field(default_factory=list)
    error: str | None = None


@dataclass
class WorstLaunch:
    """The launch farthest from the ledger's count under one cache policy."""

    n: int
    kernel: str
    ratio: float


@dataclass
class PolicyVerdict:
    """The 3% rule under one cache policy."""

    launches_checked: int
    passed: bool
    worst: WorstLaunch | None


@dataclass
class AgreementCheck:
    """The 3% rule, judged per cache policy; ``passed`` is the verdict with the L2 kept."""

    rule: str
    by_cache_policy: dict[str, PolicyVerdict]
    passed: bool
    note: str = ""


@dataclass(kw_only=True)
class NcuRecord(Record):
    """What both of lesson 04's hardware counts say first: what was measured, with which metrics, beside which L2."""

    what: str
    metrics: list[str]
    l2_cache_bytes: int | None


@dataclass(kw_only=True)
class NcuDram(NcuRecord, schema="ncu_dram", version=3):
    """Nsight Compute's DRAM bytes per launch beside the ledger's count, per cache policy."""

    sizes: list[int]
    modes: dict[str, NcuMode]  # by ncu --cache-control value: "all" (flushed before each kernel), "none" (kept)
    agreement_check: AgreementCheck


@dataclass
class CorpusLaunch:
    """One launch of the corpus run: the ledger's bytes (or why it has none) beside ncu's DRAM bytes."""

    n: int
    shape: str
    kernel: str
    threads: int
    ledger_bytes_read: int | None
    ledger_bytes_written: int | None
    uncounted: str | None
    ncu_dram_bytes_read: float
    ncu_dram_bytes_written: float
    ratio: float | None  # ncu (read + written) / ledger (read + written)


@dataclass(kw_only=True)
class NcuCorpus(NcuRecord, schema="ncu_corpus", version=1):
    """The series kernels and a few corpus shapes at one large size: ledger against ncu's DRAM bytes."""

    n: int
    cache_control: str
    command: str = ""
    launches: list[CorpusLaunch] = field(default_factory=list)
    error: str | None = None
