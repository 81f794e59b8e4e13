"""The records of lesson 11's attention (``reductions_attention.json``, ``reductions_attention_ncu.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers import results
from helpers.lessons.softmax.record import Measured


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
