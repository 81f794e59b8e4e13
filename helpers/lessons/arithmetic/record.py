"""The record of the seed's three claims, measured (``seed_claims.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers.results import Record


@dataclass
class LaneCount:
    """FP32 lanes on the device: SMs x lanes per SM."""

    sm_count: int
    compute_capability: list[int]
    fp32_lanes_per_sm: int
    lanes: int


@dataclass
class KernelUse:
    """One kernel as ncu saw it: how busy the SMs and the DRAM were, and why warps waited."""

    kernel: str
    n: int
    duration_us: float | None
    sm_throughput_pct: float | None
    dram_throughput_pct: float | None
    issue_active_pct: float | None = None
    fma_pipe_pct: float | None = None
    stalls_per_issue: dict[str, float] = field(default_factory=dict)  # reason -> warps stalled per issued instruction

    def top_stall(self) -> tuple[str, float] | None:
        """The stall reason that holds the most warps, and its share of all stalls."""
        if not self.stalls_per_issue:
            return None
        total = sum(self.stalls_per_issue.values())
        reason = max(self.stalls_per_issue, key=self.stalls_per_issue.__getitem__)
        return reason, (self.stalls_per_issue[reason] / total if total else 0.0)


@dataclass
class CompileFusion:
    """What ``torch.compile`` makes of ``(a + b) * c / s``."""

    n: int
    eager_kernels: int
    compiled_kernels: int
    compiled_kernel_names: list[str]
    triton_source: str  # the generated Triton kernel, as Inductor wrote it
    max_abs_diff_vs_numpy: float
    bitwise_equal_to_numpy: bool
    max_abs_diff_eager_vs_numpy: float
    torch_version: str
    triton_version: str | None
    bitwise_equal_to_eager: bool | None = None  # None: not recorded (records before 2026-12-06)


@dataclass(kw_only=True)
class SeedClaims(Record, schema="seed_claims", version=1):
    """The three measurements together; any part may be missing (``None``) with the reason in ``errors``."""

    lanes: LaneCount | None
    kernels: list[KernelUse] | None
    ncu_metrics: list[str]
    compile: CompileFusion | None
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class FmaSweep(Record, schema="fma_sweep", version=1):
    """Notebook 02's sweep: the median time of ``fma_chain_kernel`` (read 4 bytes, write 4 per element) at each count
    of FMAs per element, with the two floors it is drawn against."""

    n: int
    fmas: list[int]  # FMAs per element: 8 x rounds
    median_ms: list[float]
    iqr_ms: list[float] = field(default_factory=list)  # the IQR of each count's repeats (empty: not recorded)
    repeats: int
    bandwidth_gbs: float  # the bound the memory floor uses (the datasheet's, else the measured copy)
    peak_flops: float  # SMs x FP32 lanes x 2 x clock
    memory_floor_ms: float  # 8 n bytes / the bound
    ms_per_fma: float  # the arithmetic floor per FMA per element: 2 n / peak
    knee_fmas: float  # where the two floors cross
