"""The record of notebook 09's measurement (``launches.json``), and the names of its variants."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from helpers.results import Claim, Record
from helpers.sizes import BLOCK_SIZE

THREE, FUSED = "three kernels", "fused"
DIRECT_THREE, DIRECT_FUSED = "numba three kernels", "numba fused"
GRAPH_THREE, GRAPH_FUSED = "numba three kernels + graph", "numba fused + graph"
GRAPH_BEST = "numba fused (best) + graph"
NUMBA_VARIANTS = (DIRECT_THREE, DIRECT_FUSED, GRAPH_THREE, GRAPH_FUSED, GRAPH_BEST)
RO, RO_STATIC = "torch.compile reduce-overhead", "torch.compile reduce-overhead, static inputs"
PEERS = ("cupy ElementwiseKernel", "torch eager", "torch.compile", RO, RO_STATIC)


def _median(samples: str) -> property:
    """A property: the median of the list field ``samples``."""
    return property(lambda self: statistics.median(getattr(self, samples)))


@dataclass
class ArgumentCost:
    """Host microseconds per launch of a kernel taking ``arrays`` array arguments (samples)."""

    arrays: int
    lazy_us: list[float]
    explicit_us: list[float]
    graph_us: list[float]  # one replay of a graph holding this one launch
    lazy, explicit, graph = _median("lazy_us"), _median("explicit_us"), _median("graph_us")


@dataclass
class Variant:
    """One way of computing ``out``: what it is, and whether it ran here."""

    label: str
    traffic: str  # "three kernels" or "fused": whose memory traffic it has
    launches: int  # kernel launches per call (a graph replay is one call holding them)
    graph: bool  # replayed from a CUDA graph (recorded by us, or by torch)
    status: str = "ok"  # "ok", "absent" (cannot run here) or "failed" (wrong answer: never timed)
    reason: str | None = None
    note: str = ""


@dataclass
class Check:
    """One correctness check of a variant, before it was timed."""

    variant: str
    n: int
    passed: bool
    poisoned: bool
    error: str | None = None


@dataclass
class Timed:
    """A variant (or a call) at one size, timed three ways (:func:`helpers.lessons.launches.graphs.time_calls`)."""

    variant: str
    n: int
    host_us: list[float]  # host time per call, bursts of back-to-back calls (the GPU keeps up: the launch cost)
    loop_ms: list[float]  # events around one call, GPU idle before it: what a Python loop sees
    gpu_ms: list[float]  # events around one call queued behind a hold kernel: GPU work only
    burst: int
    hold_us: float
    loop, gpu, host = _median("loop_ms"), _median("gpu_ms"), _median("host_us")


@dataclass
class Counted:
    """A pipeline's traffic, counted by the ledger on the launches a graph records."""

    launches: int
    trips: int
    bytes_per_element: float
    counted_by: str


@dataclass
class Settings:
    sizes: list[int]
    repeats: int
    burst_small: int
    burst_large: int
    argument_n: int
    block_size: int = BLOCK_SIZE
    dtype: str = "float32"
    timing: str = ("host_us: time.perf_counter over bursts of calls; loop_ms: CUDA events around one call "
                   "with the GPU idle before it (launch cost included); gpu_ms: CUDA events around one call "
                   "queued behind a hold kernel (launch cost hidden). Events on the stream the work runs on.")


@dataclass(kw_only=True)
class LaunchesRun(Record, schema="launches", version=1):
    """Host cost per launch against arguments, and the 2x2 of fusion and graphs over sizes."""

    simulated: bool
    note: str
    settings: Settings
    api: dict[str, str] = field(default_factory=dict)  # which cuda.core this ran on, import paths
    argument_costs: list[ArgumentCost] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)
    pipelines: dict[str, Counted] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    bitwise: dict[str, bool] = field(default_factory=dict)  # graph replay against direct launches
    timings: list[Timed] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    torch_counters: dict[str, int] = field(default_factory=dict)
    complete: bool = False
    elapsed_s: float = 0.0

    def timed(self, variant: str, n: int) -> Timed | None:
        return next((t for t in self.timings if t.variant == variant and t.n == n), None)

    def median(self, variant: str, n: int, mode: str = "loop") -> float | None:
        """Median ms (``loop`` or ``gpu``) or µs (``host``) of a variant at size n; None if not timed."""
        t = self.timed(variant, n)
        return None if t is None else getattr(t, mode)

    def measured(self) -> list[str]:
        """Labels of the variants with timings, in the order they ran."""
        return [v.label for v in self.variants if any(t.variant == v.label for t in self.timings)]

    def sizes(self) -> list[int]:
        return sorted({t.n for t in self.timings})


@dataclass(kw_only=True)
class CompiledPerSize(LaunchesRun, schema="launches_compiled_per_size", version=1):
    """A run whose torch.compile variants were compiled once per size (``dynamic=False``), kept apart from
    :class:`LaunchesRun`, whose one compilation serves every size (``dynamic=True``)."""
