"""The records of lesson 12's attention (``reductions_attention.json``, ``reductions_attention_ncu.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers import results
from helpers.lessons.softmax.record import Measured, committed_fastest


@dataclass
class AttentionRow:
    batch: int
    heads: int
    length: int
    head_dim: int
    flops: float  # 4 L^2 d per head: two matrix products
    unfused_scratch_bytes: int  # S and P
    measured: list[Measured] = field(default_factory=list)


@dataclass
class AttentionBench(results.Record, schema="reductions_attention", version=1):
    peak_fp32_flops: float | None
    rows: list[AttentionRow] = field(default_factory=list)
    sgemm_fp32_flops: float | None = None  # cuBLAS, TF32 off, measured in the same run


@dataclass
class AttentionLong(results.Record, schema="reductions_attention_long", version=1):
    """The fused kernels at a length where S and P cannot exist: what the unfused pipeline would allocate."""

    batch: int
    heads: int
    length: int
    head_dim: int
    unfused_scratch_bytes: int  # S and P: 2 x heads x L x L floats
    device_memory_bytes: int | None
    measured: list[Measured] = field(default_factory=list)


@dataclass
class KernelDram:
    """One profiled launch: DRAM bytes read and written, from Nsight Compute."""

    kernel: str
    dram_read: float
    dram_write: float


@dataclass
class AttentionDram(results.Record, schema="reductions_attention_ncu", version=1):
    length: int
    heads: int
    kernels: list[KernelDram]
    fused_dram_bytes: float
    unfused_dram_bytes: float
    ratio: float | None
    pipelines: dict[str, float] = field(default_factory=dict)  # DRAM bytes of each pipeline the workload ran


def fastest_at_longest(pattern: str, max_error: float | None = None) -> tuple[int, ...] | None:
    """The parts of the name of the fastest entry matching ``pattern`` (and, if given, within ``max_error``) at the
    committed record's longest sequence (the H200's), e.g. a block shape: each group's number, 0 for an optional
    group that is absent and 1 for one that names a word (`` prefetch``); None without the record or such an entry."""
    found = committed_fastest(AttentionBench, pattern, key=lambda row: row.length, max_error=max_error)
    if not found:
        return None
    return tuple(0 if x is None else int(x) if x.isdigit() else 1 for x in found[max(found)].groups())
