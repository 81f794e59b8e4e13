"""The record of one bytes-in-flight run (``bytes_in_flight.json``); its methods apply the model to it."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers.lessons.inflight.model import (DIAGNOSTICS, SHAPES, average_in_flight_factor, curve_points,
                                            implied_latency_ns, predict_gbs, probe_chain)
from helpers.results import Claim, Record


@dataclass
class ChasePoint:
    """One pointer chase: a footprint, an order, and the time per dependent load."""

    footprint_bytes: int
    stride_bytes: int
    order: str  # "random": any line next; "page_local": random lines within each 2 MiB page, pages in order
    steps: int
    ns_per_load: float | None = None  # median of the samples
    samples_ns: list[float] = field(default_factory=list)
    error: str | None = None
    fresh: bool = False  # True: each repeat continues the chain onto lines no repeat has touched yet

    def latency_ns(self) -> float | None:
        """ns per load over lines not yet cached (without ``fresh`` the later repeats found the first's lines in
        the L2: only the first sample measured the buffer's own level)."""
        if self.fresh or not self.samples_ns:
            return self.ns_per_load
        return self.samples_ns[0]


@dataclass
class OpLatency:
    """One float32 operation timed as a chain of dependent operations in one thread (ns each)."""

    op: str  # "add", "mul" or "div" (IEEE, as Numba compiles ``/`` without fastmath)
    ops: int  # dependent operations in the longer of the two timed chains
    ns_per_op: float | None = None  # (time of the long chain - time of the short one) / the extra operations
    cycles_per_op: float | None = None  # at the SM clock the device reports
    bitwise_equal: bool | None = None  # the chain's result against NumPy's float32 result, step by step
    error: str | None = None


@dataclass
class ProbePoint:
    """One probe kernel configuration: its bytes in flight per SM and the bandwidth it reached."""

    reads: int  # arrays read per element (one is written)
    width_bytes: int  # bytes per access (4: a float, 16: a float4)
    unroll: int  # independent accesses per array per thread in flight
    blocks_per_sm: int  # blocks launched per SM (the grid is SMs x this)
    registers: int | None
    threads_per_sm: int
    loads_per_thread: int
    bytes_in_flight_per_sm: int
    n: int
    median_ms: float | None = None
    iqr_ms: float | None = None
    gbs: float | None = None  # read + write
    bitwise_equal: bool | None = None
    error: str | None = None
    grid: str = "resident"  # "resident": SMs x blocks_per_sm, grid-stride; "full": one group per thread

    @property
    def read_gbs(self) -> float | None:
        return None if self.gbs is None else self.gbs * self.reads / (self.reads + 1)


@dataclass
class KernelPoint:
    """One of the series' kernels: its shape (loads in flight, occupancy) and its measured bandwidth."""

    name: str
    family: str  # "three kernels", "fused", "notebook 07", "16-byte three kernels", "copy"
    reads: int
    writes: int
    width_bytes: int
    groups_in_flight: int  # independent accesses per array per thread in flight
    grid: str  # "full": one thread per element (group); "resident": SMs x resident blocks
    registers: int | None = None
    threads_per_sm: int | None = None
    loads_per_thread: int | None = None
    bytes_in_flight_per_sm: int | None = None
    n: int = 0
    median_ms: float | None = None
    iqr_ms: float | None = None
    gbs: float | None = None
    bitwise_equal: bool | None = None
    error: str | None = None


@dataclass
class PipelinePoint:
    """One corner of the 2x2: a whole pipeline (one or three launches) timed end to end."""

    name: str
    width_bytes: int
    kernels: list[str]
    bytes_per_element: int
    n: int
    median_ms: float | None = None
    iqr_ms: float | None = None
    bitwise_equal: bool | None = None
    error: str | None = None


@dataclass(kw_only=True)
class BytesInFlight(Record, schema="bytes_in_flight", version=1):
    """Latency, the bandwidth-against-bytes-in-flight curve, and the series' kernels, in one run."""

    sms: int
    block_size: int
    repeats: int
    n_probe: int
    n_kernels: int
    datasheet_gbs: float | None
    chase: list[ChasePoint]
    probes: list[ProbePoint]
    kernels: list[KernelPoint]
    pipelines: list[PipelinePoint]
    library_copy_gbs: float | None = None
    library_copy: str | None = None
    blocks_per_sm_seen: dict[int, list[int]] = field(default_factory=dict)  # launched -> [fewest, most, SMs used]
    diagnostics: list[KernelPoint] = field(default_factory=list)  # kernels that test an explanation, not predicted
    op_latency: list[OpLatency] = field(default_factory=list)  # add, mul, div: ns per dependent operation
    elapsed_s: float | None = None
    claims: list[Claim] = field(default_factory=list)

    def dram_latency_ns(self) -> float | None:
        """The page-local chase through the largest footprint: DRAM latency without TLB misses."""
        rows = [c for c in self.chase if c.order == "page_local" and c.latency_ns()]
        return max(rows, key=lambda c: c.footprint_bytes).latency_ns() if rows else None

    def best_gbs(self, reads: int) -> float | None:
        """The series' *best measurement* for this mix: the fastest streaming probe (or copy) reading ``reads`` arrays."""
        rates = [p.gbs for p in self.probes if p.reads == reads and p.gbs and p.bitwise_equal]
        if reads == 1 and self.library_copy_gbs:
            rates.append(self.library_copy_gbs)
        return max(rates) if rates else None

    def kernel(self, name: str) -> KernelPoint:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no kernel named {name!r}; measured: {', '.join(k.name for k in self.kernels)}")

    def op_ns(self) -> dict[str, float]:
        """ns per dependent operation, for each operation measured correctly."""
        return {o.op: o.ns_per_op for o in self.op_latency if o.ns_per_op is not None and o.bitwise_equal}

    def arithmetic_ns(self, k: KernelPoint) -> float | None:
        """Time per trip (ns) that ``k``'s dependent arithmetic adds beyond its mix's probe's, whose own is already
        in the curve; None if not measured."""
        shape = SHAPES.get(k.name) or DIAGNOSTICS.get(k.name)
        ns = self.op_ns()
        if shape is None or not ns:
            return None
        chain, probe = shape.chain, probe_chain(k.reads)
        if any(op not in ns for op in (*chain, *probe)):
            return None
        return sum(ns[op] for op in chain) - sum(ns[op] for op in probe)

    def loaded_latency_ns(self, k: KernelPoint, pooled: bool = False) -> float | None:
        """The latency the curve implies at ``k``'s bytes in flight (Little's law solved for it)."""
        base = self.predicted_gbs(k, pooled, arithmetic=False)
        if not base or not k.bytes_in_flight_per_sm:
            return None
        return implied_latency_ns(k.bytes_in_flight_per_sm, self.sms, base * k.reads / (k.reads + k.writes))

    def predicted_gbs(self, k: KernelPoint, pooled: bool = False, arithmetic: bool = True) -> float | None:
        """The model's bandwidth for kernel ``k``: the curve of its mix (and width, unless ``pooled``) at its peak
        bytes in flight; with ``arithmetic`` (and measured operation latencies), scaled to the *average* bytes in
        flight by ``L / (L + t)`` (``L``: the latency the curve implies there, ``t``: :meth:`arithmetic_ns`)."""
        if not k.bytes_in_flight_per_sm:
            return None
        points = curve_points(self.probes, k.reads, None if pooled else k.width_bytes)
        base = predict_gbs(points, k.bytes_in_flight_per_sm)
        extra = self.arithmetic_ns(k) if arithmetic else None
        if base is None or extra is None:
            return base
        latency = implied_latency_ns(k.bytes_in_flight_per_sm, self.sms, base * k.reads / (k.reads + k.writes))
        return base * average_in_flight_factor(latency, extra)

    def pipeline(self, name: str) -> PipelinePoint:
        for p in self.pipelines:
            if p.name == name:
                return p
        raise KeyError(f"no pipeline named {name!r}")
