"""Bytes in flight: a model of the bandwidth a streaming kernel achieves (Little's law).

A memory system that answers a load after a latency ``L`` delivers, at most, the bytes
that are waiting for an answer divided by that latency::

    bandwidth = bytes in flight / latency        (until the device's own limit)

This module measures the two ingredients on a GPU and applies the model to the
series' kernels:

* :func:`measure_latency`: one thread chasing pointers through a random permutation
  of cache lines in a buffer far larger than the L2 (ns per dependent load);
* :func:`measure_curve`: *probe* kernels that stream ``reads`` arrays into one output,
  with 1, 2 or 4 independent element groups per thread in flight, 4- or 16-byte
  accesses, and 1 to 8 resident blocks per SM: achieved bandwidth against the bytes
  in flight per SM;
* :func:`measure_kernels`: the series' own kernels (add, multiply, scale, a copy,
  fused and notebook 07's variants, and 16-byte versions of the three kernels), each
  checked, timed, and described by its loads in flight and its occupancy (read from
  the compiled code's register count);
* :func:`predict_gbs`: the model's prediction for a kernel from the measured curve.

``python -m helpers.lessons.inflight.inflight`` runs all of it (GPU only) and writes
``results/<gpu>/bytes_in_flight.json``.  The arithmetic (:func:`bytes_in_flight_per_sm`,
:func:`threads_per_sm`, :func:`littles_law_gbs`, :func:`predict_gbs`) needs no GPU.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import poison, random_inputs
from helpers.device import banner, clock_hz, datasheet_bandwidth_gbs, sm_count
from helpers.lessons.roofline import roofline
from helpers.lessons.roofline.roofline import load4, registers_per_thread, resident_blocks_per_sm, store4
from helpers.lessons.sweep.record import Sweep
from helpers.pipeline import add_kernel, fused_kernel, multiply_kernel, reference, scale_kernel
from helpers.results import Claim, Record, ResultError, load, save
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import copy_bandwidth, time_gpu
from helpers.validate import check_elementwise

LINE_BYTES = 128
"""One L1 cache line: the pointer chase steps at least this far, so no two loads share a line."""
PAGE_BYTES = 2 * 1024 * 1024
"""The GPU's large page: a chase kept inside one page at a time avoids TLB misses."""
THREADS_PER_SM = 2048
"""Hopper's limit of resident threads per SM (64 warps)."""
UNROLLS = (1, 2, 4)
WIDTHS = (4, 16)
READS = (1, 2, 3)
BLOCKS_PER_SM = (1, 2, 3, 4, 6, 8)
NEAR_PERCENT = 10.0  # each prediction should land within 10% of its measurement


# --- the model's arithmetic (no GPU needed) -----------------------------------------------------


def threads_per_sm(registers: int | None, block_size: int = BLOCK_SIZE, blocks_launched_per_sm: int | None = None) -> int:
    """Resident threads per SM: blocks that fit (registers, threads, block limit) x block size.

    ``blocks_launched_per_sm`` caps the count for a grid of that many blocks per SM
    (a resident grid sized to fewer blocks than fit).
    """
    fit = resident_blocks_per_sm(registers, block_size)
    if blocks_launched_per_sm is not None:
        if blocks_launched_per_sm < 1:
            raise ValueError(f"blocks_launched_per_sm must be at least 1, got {blocks_launched_per_sm}")
        fit = min(fit, blocks_launched_per_sm)
    return fit * block_size


def bytes_in_flight_per_sm(loads_per_thread: int, bytes_per_load: int, threads: int) -> int:
    """Bytes an SM has requested and not yet received when every resident thread has issued its loads."""
    for name, value in (("loads_per_thread", loads_per_thread), ("bytes_per_load", bytes_per_load), ("threads", threads)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if threads > THREADS_PER_SM:
        raise ValueError(f"an SM holds at most {THREADS_PER_SM} threads, got {threads}")
    return loads_per_thread * bytes_per_load * threads


def littles_law_gbs(in_flight_per_sm: float, sms: int, latency_ns: float, reads: int = 1, writes: int = 0) -> float:
    """Read+write GB/s that ``in_flight_per_sm`` read bytes sustain over ``latency_ns`` on ``sms`` SMs.

    Reads arrive at ``sms * in_flight / latency`` bytes per ns (= GB/s); each element
    read from ``reads`` arrays also writes ``writes``, which ride along at the same rate.
    """
    if latency_ns <= 0 or sms < 1 or reads < 1 or writes < 0:
        raise ValueError("latency_ns and sms must be positive, reads at least 1, writes not negative")
    return sms * in_flight_per_sm / latency_ns * (reads + writes) / reads


def implied_latency_ns(in_flight_per_sm: float, sms: int, read_gbs: float) -> float:
    """Little's law solved for the latency: what a measured read rate implies (ns)."""
    if read_gbs <= 0:
        raise ValueError("read_gbs must be positive")
    return sms * in_flight_per_sm / read_gbs


def curve_points(probes: list["ProbePoint"], reads: int, width_bytes: int | None = None) -> list[tuple[float, float]]:
    """The measured curve (bytes in flight per SM, read+write GB/s) for one read/write mix.

    Probes of equal bytes in flight (reached by different unrolls and occupancies) are
    merged by their median.  ``width_bytes=None`` pools both access widths.  Only the
    resident-grid probes, whose occupancy is set, make the curve.
    """
    by_q: dict[int, list[float]] = {}
    for p in probes:
        if p.reads != reads or p.gbs is None or not p.bitwise_equal or p.grid != "resident":
            continue
        if width_bytes is not None and p.width_bytes != width_bytes:
            continue
        by_q.setdefault(p.bytes_in_flight_per_sm, []).append(p.gbs)
    return [(float(q), statistics.median(v)) for q, v in sorted(by_q.items())]


def predict_gbs(points: list[tuple[float, float]], in_flight_per_sm: float) -> float | None:
    """The curve read at ``in_flight_per_sm``: linear in log(bytes in flight) between measured points.

    The curve is first made non-decreasing (more bytes in flight never lowers the
    bandwidth the memory *can* deliver; a dip is noise or another limit).  Below the
    smallest point the rate scales in proportion (Little's law, latency fixed);
    above the largest it stays flat (the device's limit).
    """
    if not points:
        return None
    if in_flight_per_sm <= 0:
        raise ValueError("in_flight_per_sm must be positive")
    qs = np.array([q for q, _ in points], dtype=float)
    bw = np.maximum.accumulate(np.array([g for _, g in points], dtype=float))
    if in_flight_per_sm <= qs[0]:
        return float(bw[0] * in_flight_per_sm / qs[0])
    if in_flight_per_sm >= qs[-1]:
        return float(bw[-1])
    return float(np.interp(np.log(in_flight_per_sm), np.log(qs), bw))


def average_in_flight_factor(latency_ns: float, other_ns: float) -> float:
    """The share of a trip a thread has its loads in flight: ``latency / (latency + other)``.

    Little's law holds for the *average* bytes in flight.  A thread that spends
    ``other_ns`` per trip on work between its loads' arrival and its next loads (a
    division before the store, say) has nothing in flight for that time.  A negative
    ``other_ns`` (less such work than the probes that drew the curve) raises the share.
    """
    if latency_ns <= 0:
        raise ValueError(f"latency_ns must be positive, got {latency_ns}")
    if latency_ns + other_ns <= 0:
        raise ValueError(f"other_ns ({other_ns}) must be more than -latency_ns ({-latency_ns})")
    return latency_ns / (latency_ns + other_ns)


def probe_chain(reads: int) -> tuple[str, ...]:
    """The dependent arithmetic a probe does between its loads and its store: ``reads - 1`` additions."""
    return ("add",) * (reads - 1)


def percent_off(predicted: float | None, measured: float | None) -> float | None:
    """(predicted - measured) / measured, in percent."""
    if predicted is None or not measured:
        return None
    return 100.0 * (predicted - measured) / measured


# --- records ----------------------------------------------------------------------------------------


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
        """ns per load over lines not yet cached.

        Without ``fresh``, every repeat walked the same lines from the same start, so
        the repeats after the first found those lines in the L2 (8 MiB of them, for
        65,536 steps): only the first sample measured the buffer's own level.
        """
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
class BytesInFlight(Record):
    """Latency, the bandwidth-against-bytes-in-flight curve, and the series' kernels, in one run."""

    SCHEMA: ClassVar[str] = "bytes_in_flight"
    VERSION: ClassVar[int] = 1
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
        """Time per trip that ``k``'s dependent arithmetic adds beyond the probes' (ns); None if not measured.

        A kernel's chain (its operations between the loads' arrival and the store) minus the
        additions the probe of its mix does: the probes' own arithmetic is already in the curve.
        """
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
        """The model's bandwidth for kernel ``k``.

        The curve of its mix (and width, unless ``pooled``) read at its peak bytes in
        flight; then, with ``arithmetic``, scaled to the *average* bytes in flight: by
        ``L / (L + t)``, where ``L`` is the latency the curve implies there and ``t`` the
        time per trip that the kernel's dependent arithmetic adds beyond the probes'.
        Without measured operation latencies the second step is left out.
        """
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


# --- kernels: probes, pointer chase, 16-byte three kernels, a copy ---------------------------------


def _probe_source(reads: int, width: int, unroll: int) -> str:
    """Source of a grid-stride probe: ``reads`` arrays summed into ``out``, ``unroll`` groups per thread in flight."""
    names = "xyz"[:reads]
    lines = ["def probe(x, y, z, out, groups):",
             "    j = cuda.grid(1)",
             "    stride = cuda.gridsize(1)",
             f"    while j + {unroll - 1} * stride < groups:"]

    def load(arr: str, u: int) -> list[str]:
        at = f"j + {u} * stride" if u else "j"
        if width == 16:
            return [f"        {arr}{u}_0, {arr}{u}_1, {arr}{u}_2, {arr}{u}_3 = load4({arr}, {at})"]
        return [f"        {arr}{u}_0 = {arr}[{at}]"]

    parts = range(4) if width == 16 else range(1)
    for arr in names:  # every load of the trip is issued before any store
        for u in range(unroll):
            lines += load(arr, u)
    for u in range(unroll):
        at = f"j + {u} * stride" if u else "j"
        sums = [" + ".join(f"{arr}{u}_{p}" for arr in names) for p in parts]
        if width == 16:
            lines.append(f"        store4(out, {at}, {', '.join(sums)})")
        else:
            lines.append(f"        out[{at}] = {sums[0]}")
    lines.append(f"        j += {unroll} * stride")
    lines.append("    while j < groups:")
    for arr in names:
        lines += [s.replace("0_", "t_") for s in load(arr, 0)]
    sums = [" + ".join(f"{arr}t_{p}" for arr in names) for p in parts]
    lines.append(f"        store4(out, j, {', '.join(sums)})" if width == 16 else f"        out[j] = {sums[0]}")
    lines.append("        j += stride")
    return "\n".join(lines) + "\n"


_PROBES: dict[tuple[int, int, int], Any] = {}


def probe_kernel(reads: int, width: int, unroll: int) -> Any:
    """The compiled-on-demand probe kernel ``(x, y, z, out, groups)`` for one configuration."""
    if reads not in READS or width not in WIDTHS or unroll < 1:
        raise ValueError(f"no probe for reads={reads}, width={width}, unroll={unroll}: reads in {READS}, "
                         f"width in {WIDTHS}, unroll >= 1")
    key = (reads, width, unroll)
    if key not in _PROBES:
        scope: dict[str, Any] = {"cuda": cuda, "load4": load4, "store4": store4}
        exec(compile(_probe_source(reads, width, unroll), f"<probe r{reads} w{width} u{unroll}>", "exec"), scope)
        _PROBES[key] = cuda.jit(scope["probe"])
    return _PROBES[key]


def probe_expected(x: np.ndarray, y: np.ndarray, z: np.ndarray, reads: int) -> np.ndarray:
    """What a probe writes: the sum of its ``reads`` inputs, in the kernel's order."""
    return [x, x + y, x + y + z][reads - 1]


def run_probe(reads: int, width: int, unroll: int, grid: int, x: Any, y: Any, z: Any, out: Any,
              block: int = BLOCK_SIZE) -> None:
    """Launch one probe over ``out`` (its length must be a multiple of ``width // 4``)."""
    per = width // 4
    if out.size % per:
        raise ValueError(f"a {width}-byte probe needs a length that is a multiple of {per}, got {out.size}")
    probe_kernel(reads, width, unroll)[grid, block](x, y, z, out, out.size // per)


@cuda.jit
def chase_kernel(next_index, start, steps, out):
    j = start
    for _ in range(steps):
        j = next_index[j]  # each load needs the one before it: nothing overlaps
    out[0] = j


def chase_order(lines: int, lines_per_page: int, order: str, rng: np.random.Generator) -> np.ndarray:
    """The order the chase visits ``lines`` cache lines: all shuffled, or shuffled within each page."""
    if order == "random":
        return rng.permutation(lines)
    if order == "page_local":
        pages = -(-lines // lines_per_page)
        parts = [p * lines_per_page + rng.permutation(min(lines_per_page, lines - p * lines_per_page))
                 for p in range(pages)]
        return np.concatenate(parts)
    raise ValueError(f"order must be 'random' or 'page_local', got {order!r}")


def chase_buffer(footprint_bytes: int, stride_bytes: int, order: str, seed: int = 0) -> tuple[np.ndarray, int]:
    """An int32 buffer of ``footprint_bytes`` holding one cycle through its lines, and the cycle's start."""
    if stride_bytes < 4 or stride_bytes % 4 or footprint_bytes < 2 * stride_bytes:
        raise ValueError("stride_bytes must be a positive multiple of 4 and the footprint at least two strides")
    per = stride_bytes // 4
    lines = footprint_bytes // stride_bytes
    visit = chase_order(lines, max(1, PAGE_BYTES // stride_bytes), order, np.random.default_rng(seed))
    positions = (visit * per).astype(np.int64)
    buffer = np.zeros(lines * per, dtype=np.int32)
    buffer[positions] = np.roll(positions, -1)
    return buffer, int(positions[0])


def chase_reference(buffer: np.ndarray, start: int, steps: int) -> int:
    """Where ``steps`` dependent loads from ``start`` end, computed on the host."""
    j = start
    for _ in range(steps):
        j = int(buffer[j])
    return j


@cuda.jit
def add_chain(x, s, steps, out):
    y = x[0]
    for _ in range(steps):  # eight dependent additions per step: each needs the one before it
        y = y + s
        y = y + s
        y = y + s
        y = y + s
        y = y + s
        y = y + s
        y = y + s
        y = y + s
    out[0] = y


@cuda.jit
def mul_chain(x, s, steps, out):
    y = x[0]
    for _ in range(steps):
        y = y * s
        y = y * s
        y = y * s
        y = y * s
        y = y * s
        y = y * s
        y = y * s
        y = y * s
    out[0] = y


@cuda.jit
def div_chain(x, s, steps, out):
    y = x[0]
    for _ in range(steps):
        y = y / s
        y = y / s
        y = y / s
        y = y / s
        y = y / s
        y = y / s
        y = y / s
        y = y / s
    out[0] = y


CHAINS: dict[str, tuple[Any, float]] = {"add": (add_chain, 1e-3), "mul": (mul_chain, 1.0001), "div": (div_chain, 1.0001)}
"""Each operation's chain kernel and the operand it applies (values stay normal floats over the chain)."""
OPS_PER_STEP = 8


def chain_reference(op: str, start: float, s: float, steps: int) -> np.float32:
    """What a chain ends at, computed on the host one float32 operation at a time."""
    y, s32 = np.float32(start), np.float32(s)
    apply = {"add": np.add, "mul": np.multiply, "div": np.divide}[op]
    for _ in range(steps * OPS_PER_STEP):
        y = apply(y, s32, dtype=np.float32)
    return y


@cuda.jit
def copy_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cuda.jit
def scale_by_reciprocal_kernel(x, r, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * r  # scale_kernel's traffic, with a multiply where it divides


def _vector_tail(n: int) -> int:
    return blocks_for(max(n // 4, 3))


@cuda.jit
def add_vec4_kernel(x, y, out):
    j = cuda.grid(1)
    if j < out.size // 4:
        x0, x1, x2, x3 = load4(x, j)
        y0, y1, y2, y3 = load4(y, j)
        store4(out, j, x0 + y0, x1 + y1, x2 + y2, x3 + y3)
    i = 4 * (out.size // 4) + j  # the last n % 4 elements, one scalar each
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def multiply_vec4_kernel(x, y, out):
    j = cuda.grid(1)
    if j < out.size // 4:
        x0, x1, x2, x3 = load4(x, j)
        y0, y1, y2, y3 = load4(y, j)
        store4(out, j, x0 * y0, x1 * y1, x2 * y2, x3 * y3)
    i = 4 * (out.size // 4) + j
    if i < out.size:
        out[i] = x[i] * y[i]


@cuda.jit
def scale_vec4_kernel(x, s, out):
    j = cuda.grid(1)
    if j < out.size // 4:
        x0, x1, x2, x3 = load4(x, j)
        store4(out, j, x0 / s, x1 / s, x2 / s, x3 / s)
    i = 4 * (out.size // 4) + j
    if i < out.size:
        out[i] = x[i] / s


def run_three_vec4(a: Any, b: Any, c: Any, s: float, t1: Any, t2: Any, out: Any) -> None:
    """The three kernels with 16-byte loads and stores: one float4 per thread, full grid."""
    n = check_elementwise({"a": a, "b": b, "c": c, "t1": t1, "t2": t2, "out": out})
    roofline.require_aligned({"a": a, "b": b, "c": c, "t1": t1, "t2": t2, "out": out})
    grid, s = _vector_tail(n), a.dtype.type(s)
    add_vec4_kernel[grid, BLOCK_SIZE](a, b, t1)
    multiply_vec4_kernel[grid, BLOCK_SIZE](t1, c, t2)
    scale_vec4_kernel[grid, BLOCK_SIZE](t2, s, out)


def run_three(a: Any, b: Any, c: Any, s: float, t1: Any, t2: Any, out: Any) -> None:
    """Notebook 01's three kernels, one element per thread."""
    n = check_elementwise({"a": a, "b": b, "c": c, "t1": t1, "t2": t2, "out": out})
    grid, s = blocks_for(n), a.dtype.type(s)
    add_kernel[grid, BLOCK_SIZE](a, b, t1)
    multiply_kernel[grid, BLOCK_SIZE](t1, c, t2)
    scale_kernel[grid, BLOCK_SIZE](t2, s, out)


# --- measurement (GPU) --------------------------------------------------------------------------


class GpuOnly(RuntimeError):
    """The measurement times real kernels."""


def _require_gpu(what: str) -> None:
    if is_simulator():
        raise GpuOnly(f"{what} times real kernels: run it on a GPU")


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:400]


def measure_latency(footprints: tuple[int, ...] = (4 << 20, 256 << 20, 1 << 30), steps: int = 1 << 16,
                    stride_bytes: int = LINE_BYTES, repeats: int = 5) -> list[ChasePoint]:
    """ns per dependent load for each footprint, in random and page-local order (one thread).

    The repeats follow one another along the cycle, so in a buffer larger than the L2
    every timed load meets a line no earlier load has brought in (fewer than 400,000
    of the 2 million lines of 256 MiB are visited); a small buffer, warmed by one whole
    cycle first, measures the L2.
    """
    _require_gpu("the pointer chase")
    out = cuda.device_array(1, dtype=np.int32)
    rows = []
    for footprint in footprints:
        for order in ("page_local", "random"):
            row = ChasePoint(footprint_bytes=footprint, stride_bytes=stride_bytes, order=order, steps=steps)
            try:
                host, start = chase_buffer(footprint, stride_bytes, order, seed=footprint % 1000)
                buffer = cuda.to_device(host)
                lines = footprint // stride_bytes  # warm-up: one whole cycle if it fits in the L2, else a short run
                chase_kernel[1, 1](buffer, start, lines if footprint <= (8 << 20) else 1024, out)
                cuda.synchronize()
                here = int(out.copy_to_host()[0])  # continue from where the warm-up stopped
                begin, stop = cuda.event(), cuda.event()
                for _ in range(repeats):  # each repeat walks on along the cycle, onto lines not yet touched
                    begin.record()
                    chase_kernel[1, 1](buffer, here, steps, out)
                    stop.record()
                    stop.synchronize()
                    end = int(out.copy_to_host()[0])
                    if footprint <= (8 << 20) and end != chase_reference(host, here, steps):
                        raise RuntimeError("the chase ended at the wrong line")
                    here = end
                    row.samples_ns.append(begin.elapsed_time(stop) * 1e6 / steps)
                row.ns_per_load = statistics.median(row.samples_ns)
                row.fresh = True
                del buffer
            except Exception as exc:  # keep measuring the others
                row.error = _error(exc)
            rows.append(row)
    return rows


def measure_op_latency(steps: int = 1 << 12, repeats: int = 9) -> list[OpLatency]:
    """ns per dependent float32 add, multiply and divide: one thread, a chain of ``steps`` and of ``2 * steps``.

    The difference of the two chains' times, over the extra operations, leaves out the
    launch and the loop's set-up.  Each chain's result is checked bitwise against NumPy's.
    """
    _require_gpu("the operation latencies")
    x = cuda.to_device(np.ones(1, dtype=np.float32))
    out = cuda.device_array(1, dtype=np.float32)
    clock = clock_hz()
    rows = []
    for op, (kernel, operand) in CHAINS.items():
        row = OpLatency(op=op, ops=2 * steps * OPS_PER_STEP)
        s = np.float32(operand)
        try:
            times = []
            for k in (steps, 2 * steps):
                poison(out)
                kernel[1, 1](x, s, k, out)
                if out.copy_to_host()[0] != chain_reference(op, 1.0, operand, k):
                    raise RuntimeError(f"the {op} chain of {k * OPS_PER_STEP} operations ended at the wrong value")
                timed = time_gpu(lambda k=k: kernel[1, 1](x, s, k, out), label=f"{op} chain", repeats=repeats)
                times.append(timed.median_ms)
            row.bitwise_equal = True
            row.ns_per_op = (times[1] - times[0]) * 1e6 / (steps * OPS_PER_STEP)
            row.cycles_per_op = None if not clock else row.ns_per_op * 1e-9 * clock
        except Exception as exc:
            row.error = _error(exc)
        rows.append(row)
    return rows


def _registers(kernel: Any, args: tuple[Any, ...]) -> int | None:
    try:
        return registers_per_thread(kernel, args)
    except Exception:
        return None


def _sm_id_kernel() -> Any:
    from llvmlite import ir
    from numba.core import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def smid(typingctx: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            asm = ir.InlineAsm(ir.FunctionType(ir.IntType(32), []), "mov.u32 $0, %smid;", "=r", side_effect=True)
            return builder.call(asm, [])

        return types.int32(), codegen

    @cuda.jit
    def where(out, spin):
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = smid()
        for _ in range(spin):  # stay resident a while, so all blocks of the launch sit on the SMs together
            cuda.nanosleep(1000)

    return where


def blocks_per_sm_seen(blocks_per_sm: tuple[int, ...] = BLOCKS_PER_SM) -> dict[int, list[int]]:
    """For a grid of SMs x m blocks: the fewest and most blocks an SM received, and how many SMs got any.

    This checks the occupancy knob: each SM should hold exactly m blocks.
    """
    _require_gpu("reading SM ids")
    where = _sm_id_kernel()
    sms = sm_count() or 1
    seen: dict[int, list[int]] = {}
    for m in blocks_per_sm:
        ids = cuda.device_array(sms * m, dtype=np.int32)
        where[sms * m, BLOCK_SIZE](ids, 50)
        _, counts = np.unique(ids.copy_to_host(), return_counts=True)  # SM ids need not be contiguous
        seen[m] = [int(counts.min()), int(counts.max()), int(counts.size)]
    return seen


def measure_curve(n: int = 1 << 26, repeats: int = 15, reads: tuple[int, ...] = READS,
                  widths: tuple[int, ...] = WIDTHS, unrolls: tuple[int, ...] = UNROLLS,
                  blocks_per_sm: tuple[int, ...] = BLOCKS_PER_SM, log: Callable[[str], None] = print) -> list[ProbePoint]:
    """Every probe configuration: checked bitwise, then timed (read+write GB/s, median of ``repeats``)."""
    _require_gpu("the bandwidth curve")
    sms = sm_count() or 1
    host = random_inputs(n, seed=11)
    x, y, z = (cuda.to_device(h) for h in host)
    out = cuda.device_array(n, dtype=np.float32)
    rows = []
    for r in reads:
        want = probe_expected(*host, r)
        for w in widths:
            for u in unrolls:
                kernel = probe_kernel(r, w, u)
                args = (x, y, z, out, np.int64(n // (w // 4)))
                regs = _registers(kernel, args)
                fit = resident_blocks_per_sm(regs)
                groups = n // (w // 4)
                # resident grids of m blocks per SM; and, for one group per thread, the full grid too
                configs = [(m, sms * m, "resident") for m in blocks_per_sm if m <= fit]
                configs += [(fit, blocks_for(groups), "full")] if u == 1 else []
                for m, grid, kind in configs:  # more blocks than fit would run in waves: not that occupancy
                    threads = threads_per_sm(regs, BLOCK_SIZE, m)
                    row = ProbePoint(reads=r, width_bytes=w, unroll=u, blocks_per_sm=m, registers=regs,
                                     threads_per_sm=threads, loads_per_thread=r * u,
                                     bytes_in_flight_per_sm=bytes_in_flight_per_sm(r * u, w, threads), n=n, grid=kind)
                    try:
                        launch = lambda: run_probe(r, w, u, grid, x, y, z, out)  # noqa: E731
                        poison(out)
                        launch()
                        cuda.synchronize()
                        row.bitwise_equal = bool(np.array_equal(out.copy_to_host(), want))
                        t = time_gpu(launch, label="probe", repeats=repeats)
                        row.median_ms, row.iqr_ms = t.median_ms, t.spread_ms
                        row.gbs = t.bandwidth_gbs(4 * n * (r + 1))
                    except Exception as exc:
                        row.error = _error(exc)
                    rows.append(row)
                    log(f"  probe reads={r} width={w:2d} unroll={u} blocks/SM={m} {kind:8s} regs={regs} "
                        f"in flight {row.bytes_in_flight_per_sm / 1024:6.1f} KiB/SM: "
                        f"{row.gbs or 0:6.0f} GB/s {'' if row.bitwise_equal else row.error or 'WRONG'}")
    return rows


@dataclass(frozen=True)
class Shape:
    """How one series kernel meets memory: its mix, access width and accesses per thread in flight."""

    name: str
    family: str
    reads: int
    writes: int
    width_bytes: int
    groups_in_flight: int
    grid: str
    chain: tuple[str, ...] = ()  # dependent operations between the loads' arrival and the store


FUSED_CHAIN = ("add", "mul", "div")  # (a + b) * c / s

SHAPES: dict[str, Shape] = {s.name: s for s in [
    Shape("add", "three kernels", 2, 1, 4, 1, "full", ("add",)),
    Shape("multiply", "three kernels", 2, 1, 4, 1, "full", ("mul",)),
    Shape("scale", "three kernels", 1, 1, 4, 1, "full", ("div",)),
    Shape("copy", "copy", 1, 1, 4, 1, "full"),
    Shape("naive", "fused", 3, 1, 4, 1, "full", FUSED_CHAIN),
    Shape("grid_stride", "notebook 07", 3, 1, 4, 1, "resident", FUSED_CHAIN),
    Shape("ilp4", "notebook 07", 3, 1, 4, 4, "resident", FUSED_CHAIN),
    Shape("streaming", "notebook 07", 3, 1, 4, 1, "resident", FUSED_CHAIN),
    Shape("vec4", "notebook 07", 3, 1, 16, 1, "full", FUSED_CHAIN),
    Shape("vec4_resident", "notebook 07", 3, 1, 16, 1, "resident", FUSED_CHAIN),
    Shape("vec4_streaming", "notebook 07", 3, 1, 16, 1, "full", FUSED_CHAIN),
    Shape("linked_cuda_c", "notebook 07", 3, 1, 16, 1, "full", FUSED_CHAIN),
    Shape("add_vec4", "16-byte three kernels", 2, 1, 16, 1, "full", ("add",)),
    Shape("multiply_vec4", "16-byte three kernels", 2, 1, 16, 1, "full", ("mul",)),
    Shape("scale_vec4", "16-byte three kernels", 1, 1, 16, 1, "full", ("div",)),
]}
"""Every kernel the model predicts.  ``tests/test_inflight.py`` checks the mixes against the ledger."""


DIAGNOSTICS: dict[str, Shape] = {s.name: s for s in [
    Shape("scale_by_reciprocal", "diagnostic", 1, 1, 4, 1, "full", ("mul",)),
]}
"""Kernels measured to test an explanation: ``scale_by_reciprocal`` is ``scale`` without its division."""


def kernel_launchers(a: Any, b: Any, c: Any, s: float, t: Any, out: Any) -> dict[str, tuple[Any, tuple[Any, ...], Callable[[], None], np.ndarray]]:
    """name -> (kernel, its arguments, a launch, the expected output) for every kernel in :data:`SHAPES`."""
    n = out.size
    s32 = a.dtype.type(s)
    grid, vgrid = blocks_for(n), _vector_tail(n)
    ha, hb, hc = a.copy_to_host(), b.copy_to_host(), c.copy_to_host()
    want_fused = reference(ha, hb, hc, s)
    table: dict[str, tuple[Any, tuple[Any, ...], Callable[[], None], np.ndarray]] = {
        "add": (add_kernel, (a, b, out), lambda: add_kernel[grid, BLOCK_SIZE](a, b, out), ha + hb),
        "multiply": (multiply_kernel, (a, b, out), lambda: multiply_kernel[grid, BLOCK_SIZE](a, b, out), ha * hb),
        "scale": (scale_kernel, (a, s32, out), lambda: scale_kernel[grid, BLOCK_SIZE](a, s32, out), ha / s32),
        "copy": (copy_kernel, (a, out), lambda: copy_kernel[grid, BLOCK_SIZE](a, out), ha),
        "scale_by_reciprocal": (scale_by_reciprocal_kernel, (a, np.float32(1) / s32, out),
                                lambda: scale_by_reciprocal_kernel[grid, BLOCK_SIZE](a, np.float32(1) / s32, out),
                                ha * (np.float32(1) / s32)),
        "add_vec4": (add_vec4_kernel, (a, b, out), lambda: add_vec4_kernel[vgrid, BLOCK_SIZE](a, b, out), ha + hb),
        "multiply_vec4": (multiply_vec4_kernel, (a, b, out),
                          lambda: multiply_vec4_kernel[vgrid, BLOCK_SIZE](a, b, out), ha * hb),
        "scale_vec4": (scale_vec4_kernel, (a, s32, out), lambda: scale_vec4_kernel[vgrid, BLOCK_SIZE](a, s32, out),
                       ha / s32),
    }
    for name, v in roofline.VARIANT_INFO.items():
        if v.gpu_only and is_simulator():
            continue
        table[name] = (v.kernel, (a, b, c, s32, out), (lambda launch=v.launch: launch(a, b, c, s, out)), want_fused)
    return table


def measure_kernels(n: int = (1 << 26) + 3, repeats: int = 15, s: float = 1.7,
                    log: Callable[[str], None] = print, shapes: dict[str, Shape] | None = None) -> list[KernelPoint]:
    """Each kernel of :data:`SHAPES`: checked bitwise against NumPy, its occupancy read, then timed."""
    _require_gpu("the series kernels' bandwidth")
    host = random_inputs(n, seed=5)
    a, b, c = (cuda.to_device(h) for h in host)
    t = cuda.device_array(n, dtype=np.float32)
    out = cuda.device_array(n, dtype=np.float32)
    table = kernel_launchers(a, b, c, s, t, out)
    rows = []
    for name, shape in (SHAPES if shapes is None else shapes).items():
        row = KernelPoint(name=name, family=shape.family, reads=shape.reads, writes=shape.writes,
                          width_bytes=shape.width_bytes, groups_in_flight=shape.groups_in_flight, grid=shape.grid, n=n)
        try:
            kernel, args, launch, want = table[name]
            poison(out)
            launch()
            cuda.synchronize()
            row.bitwise_equal = bool(np.array_equal(out.copy_to_host(), want))
            row.registers = _registers(kernel, args)
            row.threads_per_sm = threads_per_sm(row.registers)
            row.loads_per_thread = shape.reads * shape.groups_in_flight
            row.bytes_in_flight_per_sm = bytes_in_flight_per_sm(row.loads_per_thread, shape.width_bytes,
                                                                row.threads_per_sm)
            timed = time_gpu(launch, label=name, repeats=repeats)
            row.median_ms, row.iqr_ms = timed.median_ms, timed.spread_ms
            row.gbs = timed.bandwidth_gbs(4 * n * (shape.reads + shape.writes))
        except Exception as exc:
            row.error = _error(exc)
        rows.append(row)
        log(f"  {name:15s} regs={row.registers} threads/SM={row.threads_per_sm} "
            f"in flight {(row.bytes_in_flight_per_sm or 0) / 1024:5.1f} KiB/SM: {row.gbs or 0:6.0f} GB/s "
            f"bitwise={row.bitwise_equal} {row.error or ''}")
    return rows


PIPELINES = {
    "three kernels, 4-byte": (4, ["add", "multiply", "scale"], 32),
    "fused, 4-byte": (4, ["naive"], 16),
    "three kernels, 16-byte": (16, ["add_vec4", "multiply_vec4", "scale_vec4"], 32),
    "fused, 16-byte": (16, ["vec4"], 16),
}
"""The 2x2: {one element per thread, one float4 per thread} x {three kernels, fused}."""


def measure_pipelines(n: int = (1 << 26) + 3, repeats: int = 15, s: float = 1.7) -> list[PipelinePoint]:
    """The four corners of the 2x2, each checked bitwise against NumPy, then timed end to end."""
    _require_gpu("the 2x2")
    host = random_inputs(n, seed=9)
    a, b, c = (cuda.to_device(h) for h in host)
    t1, t2, out = (cuda.device_array(n, dtype=np.float32) for _ in range(3))
    want = reference(*host, s)
    runs = {
        "three kernels, 4-byte": lambda: run_three(a, b, c, s, t1, t2, out),
        "fused, 4-byte": lambda: roofline.run_naive(a, b, c, s, out),
        "three kernels, 16-byte": lambda: run_three_vec4(a, b, c, s, t1, t2, out),
        "fused, 16-byte": lambda: roofline.VARIANTS["vec4"](a, b, c, s, out),
    }
    rows = []
    for name, (width, kernels, per_element) in PIPELINES.items():
        row = PipelinePoint(name=name, width_bytes=width, kernels=kernels, bytes_per_element=per_element, n=n)
        try:
            poison(out)
            runs[name]()
            cuda.synchronize()
            row.bitwise_equal = bool(np.array_equal(out.copy_to_host(), want))
            timed = time_gpu(runs[name], label=name, repeats=repeats)
            row.median_ms, row.iqr_ms = timed.median_ms, timed.spread_ms
        except Exception as exc:
            row.error = _error(exc)
        rows.append(row)
    return rows


def pipeline_prediction_ms(record: BytesInFlight, name: str, pooled: bool = False) -> float | None:
    """The model's time for a pipeline: each launch's bytes over its predicted bandwidth, summed."""
    _, kernels, _ = PIPELINES[name]
    row = record.pipeline(name)
    total = 0.0
    for k in kernels:
        kp = record.kernel(k)
        gbs = record.predicted_gbs(kp, pooled)
        if not gbs:
            return None
        total += 4 * row.n * (kp.reads + kp.writes) / (gbs * 1e9) * 1e3
    return total


def summarize(record: BytesInFlight) -> BytesInFlight:
    """One claim per kernel (prediction within 10% of the measurement), and the 2x2's two ratios."""
    claims = []
    for k in record.kernels:
        predicted = record.predicted_gbs(k)
        off = percent_off(predicted, k.gbs)
        claims.append(Claim(
            f"the bytes-in-flight model predicts {k.name}'s bandwidth within {NEAR_PERCENT:.0f}%", off,
            f"|error| <= {NEAR_PERCENT:.0f}%", None if off is None else abs(off) <= NEAR_PERCENT,
            "" if off is None else f"predicted {predicted:,.0f}, measured {k.gbs:,.0f} GB/s ({off:+.1f}%)"))
    try:
        for width in (4, 16):
            three = record.pipeline(f"three kernels, {width}-byte").median_ms
            fused = record.pipeline(f"fused, {width}-byte").median_ms
            ratio = None if not three or not fused else three / fused
            claims.append(Claim(f"with {width}-byte accesses, fused is about 2x (the bytes ratio) faster than three kernels",
                                ratio, "within 10% of 2.0x", None if ratio is None else abs(ratio / 2 - 1) <= 0.10,
                                "" if ratio is None else f"{ratio:.2f}x"))
    except KeyError:
        pass
    record.claims = claims
    return record


def measure(n_probe: int = 1 << 26, n_kernels: int = (1 << 26) + 3, repeats: int = 15,
            log: Callable[[str], None] = print,
            checkpoint: Callable[[BytesInFlight], object] | None = None) -> BytesInFlight:
    """Everything, in one run: latency, the curve, the series' kernels and the 2x2 (GPU only).

    ``checkpoint``, if given, receives the record as it grows (after each stage), so a
    run cut short still leaves what it measured.
    """
    import time

    _require_gpu("the bytes-in-flight measurement")
    started = time.perf_counter()
    record = BytesInFlight(sms=sm_count() or 0, block_size=BLOCK_SIZE, repeats=repeats, n_probe=n_probe,
                           n_kernels=n_kernels, datasheet_gbs=datasheet_bandwidth_gbs(), chase=[], probes=[],
                           kernels=[], pipelines=[])

    def stage_done() -> None:
        record.elapsed_s = time.perf_counter() - started
        if checkpoint is not None:
            checkpoint(summarize(record))

    log("pointer chase ...")
    record.chase = measure_latency()
    record.op_latency = measure_op_latency()
    for o in record.op_latency:
        log(f"  {o.op}: {o.ns_per_op or 0:.2f} ns per dependent operation ({o.cycles_per_op or 0:.0f} cycles) "
            f"{o.error or ''}")
    for c in record.chase:
        log(f"  {c.footprint_bytes >> 20:5d} MiB {c.order:10s}: {c.latency_ns() or 0:7.1f} ns per load "
            f"(samples {', '.join(f'{x:.0f}' for x in c.samples_ns)}) {c.error or ''}")
    try:
        record.blocks_per_sm_seen = blocks_per_sm_seen()
    except Exception as exc:
        log(f"  SM ids not read: {_error(exc)}")
    log(f"blocks per SM seen (launched: [fewest, most, SMs used]): {record.blocks_per_sm_seen}")
    try:
        copy = copy_bandwidth(n_probe, repeats=repeats)
        if copy is not None:
            record.library_copy_gbs, record.library_copy = copy[1], copy[0].label
    except Exception as exc:
        log(f"  library copy failed: {_error(exc)}")
    stage_done()
    log("probe curve ...")
    record.probes = measure_curve(n_probe, repeats, log=log)
    stage_done()
    log("series kernels ...")
    record.kernels = measure_kernels(n_kernels, repeats, log=log)
    record.diagnostics = measure_kernels(n_kernels, repeats, log=log, shapes=DIAGNOSTICS)
    stage_done()
    log("2x2 ...")
    record.pipelines = measure_pipelines(n_kernels, repeats)
    stage_done()
    return record


def report(record: BytesInFlight) -> str:
    """A short table: latency, best per mix, each kernel's prediction against its measurement, the 2x2."""
    lines = [f"DRAM latency (page-local chase): {record.dram_latency_ns() or 0:.0f} ns per load",
             op_latency_table(record)]
    for r in READS:
        lines.append(f"best measurement, {r} read(s) : 1 write: {record.best_gbs(r) or 0:,.0f} GB/s")
    lines.append(f"{'kernel':15s} {'KiB/SM':>7s} {'measured':>9s} {'predicted':>9s} {'off':>7s} {'pooled':>7s}")
    for k in record.kernels:
        p, q = record.predicted_gbs(k), record.predicted_gbs(k, pooled=True)
        off, offq = percent_off(p, k.gbs), percent_off(q, k.gbs)
        lines.append(f"{k.name:15s} {(k.bytes_in_flight_per_sm or 0) / 1024:7.1f} {k.gbs or 0:9.0f} {p or 0:9.0f} "
                     f"{off or 0:+6.1f}% {offq or 0:+6.1f}%")
    for d in record.diagnostics:
        lines.append(f"diagnostic {d.name}: {(d.bytes_in_flight_per_sm or 0) / 1024:.1f} KiB/SM, {d.gbs or 0:.0f} GB/s, "
                     f"bitwise={d.bitwise_equal} {d.error or ''}")
    for p in record.pipelines:
        pred = pipeline_prediction_ms(record, p.name)
        lines.append(f"{p.name:24s} {p.median_ms or 0:.4f} ms (model {pred or 0:.4f}) bitwise={p.bitwise_equal} "
                     f"{p.error or ''}")
    lines += [c.line() for c in record.claims]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.lessons.inflight.inflight``: measure latency, the curve and the kernels; write the JSON."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(
        prog="python -m helpers.lessons.inflight.inflight",
        description="Bytes in flight (Little's law): DRAM latency by pointer chase, achieved bandwidth against "
                    "bytes in flight per SM, and each series kernel's bandwidth against the model's prediction.")
    parser.add_argument("--repeats", type=int, default=15, help="timed repeats per kernel (median reported)")
    parser.add_argument("--n-probe", type=int, default=1 << 26, help="elements per array for the probe curve")
    parser.add_argument("--n-kernels", type=int, default=(1 << 26) + 3, help="elements per array for the kernels")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/<gpu>)")
    args = parser.parse_args(argv)
    print(banner())
    if is_simulator():
        print("no GPU: this run times real kernels; nothing measured")
        return 0
    record = measure(args.n_probe, args.n_kernels, args.repeats, checkpoint=lambda r: save(r, folder=args.out))
    path = save(record, folder=args.out)
    print(report(record))
    try:
        import matplotlib

        matplotlib.use("Agg")
        plot_curve(record).savefig(path.with_name("bytes_in_flight.png"), dpi=120)
        plot_predictions(record).savefig(path.with_name("bytes_in_flight_model.png"), dpi=120)
    except Exception as exc:  # the JSON is what matters; a plot failure is reported, not fatal
        print(f"plots not drawn: {_error(exc)}")
    print(f"wrote {path} in {record.elapsed_s:.0f} s")
    return 0



# --- what the notebook shows ----------------------------------------------------------------------

MIX_COLORS = {1: "tab:green", 2: "tab:orange", 3: "tab:blue"}
WIDTH_MARKERS = {4: "o", 16: "s"}


def sweep_ratio(implementations: tuple[str, str] = ("torch eager", "torch.compile"), n: int = 1 << 28) -> float | None:
    """The committed size sweep's GPU-time ratio of two implementations at ``n`` (the same experiment by other hands)."""
    try:
        sweep = load(Sweep)
    except ResultError:
        return None
    times = {m.implementation: m.median_ms for m in sweep.measurements if m.n == n and m.mode == "gpu"}
    first, second = (times.get(k) for k in implementations)
    return None if not first or not second else first / second


def plot_curve(record: BytesInFlight, show_kernels: bool = True) -> Any:
    """Achieved bandwidth against bytes in flight per SM: the probes, Little's law, the bound and the best measurements."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    for r in READS:
        for w in WIDTHS:
            pts = [p for p in record.probes if p.reads == r and p.width_bytes == w and p.gbs and p.grid == "resident"]
            if pts:
                ax.scatter([p.bytes_in_flight_per_sm / 1024 for p in pts], [p.gbs for p in pts], s=22,
                           marker=WIDTH_MARKERS[w], facecolors="none" if w == 4 else MIX_COLORS[r],
                           edgecolors=MIX_COLORS[r], label=f"probe, {r} read{'s' if r > 1 else ''} : 1 write, {w}-byte")
        best = record.best_gbs(r)
        if best:
            ax.axhline(best, color=MIX_COLORS[r], lw=0.8, ls=":")
    latency = record.dram_latency_ns()
    qs = np.geomspace(0.5, 512, 60)
    if latency:
        _ = ax.plot(qs, [littles_law_gbs(q * 1024, record.sms, latency, 3, 1) for q in qs], color="gray", lw=1,
                    label=f"Little's law, 3:1, at the idle latency ({latency:.0f} ns)")
    if record.datasheet_gbs:
        ax.axhline(record.datasheet_gbs, color="black", lw=1, ls="--")
        ax.annotate(f"datasheet bound {record.datasheet_gbs:,.0f} GB/s", (0.6, record.datasheet_gbs), fontsize=8,
                    va="bottom")
    if show_kernels:
        for k in record.kernels:
            if k.gbs and k.bytes_in_flight_per_sm:
                ax.scatter([k.bytes_in_flight_per_sm / 1024], [k.gbs], marker="*", s=90, color=MIX_COLORS[k.reads],
                           edgecolors="black", linewidths=0.5, zorder=5)
        ax.scatter([], [], marker="*", s=90, color="white", edgecolors="black", label="series kernels (colour: mix)")
    ax.set_xscale("log", base=2)
    ax.set_xlim(0.5, 512)
    ax.set_ylim(0, 1.12 * (record.datasheet_gbs or max(p.gbs or 0 for p in record.probes)))
    ax.set_xlabel("bytes in flight per SM (KiB, reads)")
    ax.set_ylabel("achieved GB/s (read + write)")
    where = record.provenance.describe() if record.provenance else ""
    ax.set_title(f"bandwidth against the bytes each SM keeps in flight\n{where}", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def plot_predictions(record: BytesInFlight) -> Any:
    """Each kernel's predicted bandwidth (open) beside its measurement (filled), with the 10% band around the measurement."""
    import matplotlib.pyplot as plt

    rows = [(k, record.predicted_gbs(k)) for k in record.kernels if k.gbs]
    rows = [(k, p) for k, p in rows if p][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.6))
    for y, (k, p) in enumerate(rows):
        color = MIX_COLORS[k.reads]
        ax.plot([k.gbs * (1 - NEAR_PERCENT / 100), k.gbs * (1 + NEAR_PERCENT / 100)], [y, y], color="lightgray", lw=6,
                solid_capstyle="butt", zorder=1)
        ax.plot([k.gbs, p], [y, y], color=color, lw=1, zorder=2)
        ax.scatter([k.gbs], [y], color=color, marker=WIDTH_MARKERS[k.width_bytes], s=36, zorder=3)
        ax.scatter([p], [y], facecolors="white", edgecolors=color, marker=WIDTH_MARKERS[k.width_bytes], s=36, zorder=3)
        curve = record.predicted_gbs(k, arithmetic=False)
        if curve and abs(curve - p) > 0.5:
            ax.scatter([curve], [y], color="gray", marker="|", s=60, zorder=3)
    ax.set_yticks(range(len(rows)), [f"{k.name} ({_kib(k.bytes_in_flight_per_sm)} KiB/SM)" for k, _ in rows], fontsize=8)
    ax.scatter([], [], color="gray", label="measured")
    ax.scatter([], [], facecolors="white", edgecolors="gray", label="predicted: average bytes in flight")
    ax.scatter([], [], color="gray", marker="|", s=60, label="the curve alone (peak bytes in flight)")
    ax.plot([], [], color="lightgray", lw=6, label=f"measured +/- {NEAR_PERCENT:.0f}%")
    ax.set_xlabel("GB/s (read + write); colour: reads per write (green 1, orange 2, blue 3); squares: 16-byte")
    where = record.provenance.describe() if record.provenance else ""
    ax.set_title(f"each kernel: the model's prediction against its measurement\n{where}", fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def _kib(nbytes: float | None) -> str:
    return "-" if not nbytes else f"{nbytes / 1024:.0f}"


def occupancy_table(record: BytesInFlight) -> str:
    """Each kernel's loads in flight per thread, registers, resident threads per SM and bytes in flight per SM."""
    lines = [f"{'kernel':15s} {'loads/thread':>12s} {'bytes/load':>10s} {'registers':>9s} {'threads/SM':>10s} "
             f"{'in flight/SM':>12s}"]
    for k in record.kernels:
        lines.append(f"{k.name:15s} {k.loads_per_thread or 0:12d} {k.width_bytes:10d} {k.registers or 0:9d} "
                     f"{k.threads_per_sm or 0:10d} {_kib(k.bytes_in_flight_per_sm):>8s} KiB")
    return "\n".join(lines)


def needed_in_flight_per_sm(record: BytesInFlight, gbs: float, reads: int = 3) -> float | None:
    """Read bytes per SM that must be in flight to sustain ``gbs`` (read+write) at the measured DRAM latency."""
    latency = record.dram_latency_ns()
    if not latency or not record.sms:
        return None
    return gbs * reads / (reads + 1) * latency / record.sms


def chase_table(record: BytesInFlight) -> str:
    """The pointer chase: footprint, order, ns per dependent load."""
    lines = [f"{'footprint':>10s} {'order':>11s} {'ns per load':>11s}"]
    for c in record.chase:
        size = f"{c.footprint_bytes >> 20} MiB" if c.footprint_bytes < 1 << 30 else f"{c.footprint_bytes >> 30} GiB"
        value = f"{c.latency_ns():11.0f}" if c.latency_ns() else f"{'-':>11s} ({c.error})"
        lines.append(f"{size:>10s} {c.order:>11s} {value}")
    return "\n".join(lines)


def loaded_latency_table(record: BytesInFlight, reads: int = 3, width: int = 16) -> str:
    """Little's law solved for the latency along one curve: the latency each probe's rate implies."""
    lines = [f"{reads} read{'s' if reads > 1 else ''} : 1 write, {width}-byte probes",
             f"{'in flight/SM':>12s} {'GB/s':>6s} {'implied latency':>15s}"]
    for q, gbs in curve_points(record.probes, reads, width):
        latency = implied_latency_ns(q, record.sms, gbs * reads / (reads + 1))
        lines.append(f"{_kib(q):>8s} KiB {gbs:6.0f} {latency:12.0f} ns")
    return "\n".join(lines)


def prediction_table(record: BytesInFlight) -> tuple[str, int, int]:
    """Predicted against measured GB/s for every kernel; also how many are within 10%, of how many.

    "curve only" is the first step alone (the curve at the peak bytes in flight); the
    last column reads one curve pooled over both access widths instead of the kernel's
    own width: how much the width matters beyond the bytes it puts in flight.
    """
    lines = [f"{'kernel':15s} {'in flight/SM':>12s} {'curve only':>10s} {'predicted':>9s} {'measured':>8s} {'error':>7s}  "
             f"within {NEAR_PERCENT:.0f}%  {'one curve for both widths':>25s}"]
    hits = total = 0
    for k in record.kernels:
        p = record.predicted_gbs(k)
        off = percent_off(p, k.gbs)
        if off is None:
            lines.append(f"{k.name:15s} not measured ({k.error or 'no result'})")
            continue
        total += 1
        hits += abs(off) <= NEAR_PERCENT
        pooled = percent_off(record.predicted_gbs(k, pooled=True), k.gbs)
        curve = record.predicted_gbs(k, arithmetic=False) or 0
        lines.append(f"{k.name:15s} {_kib(k.bytes_in_flight_per_sm):>8s} KiB {curve:10.0f} {p:9.0f} {k.gbs:8.0f} {off:+6.1f}%  "
                     f"{'yes' if abs(off) <= NEAR_PERCENT else 'no':>10s}  {pooled or 0:+24.1f}%")
    return "\n".join(lines), hits, total


def op_latency_table(record: BytesInFlight) -> str:
    """ns (and SM cycles) per dependent float32 operation, as the chains measured them."""
    lines = [f"{'operation':>9s} {'ns each':>8s} {'cycles':>7s}  checked"]
    for o in record.op_latency:
        if o.ns_per_op is None:
            lines.append(f"{o.op:>9s} {'-':>8s} {'-':>7s}  {o.error}")
            continue
        cycles = f"{o.cycles_per_op:7.0f}" if o.cycles_per_op else f"{'-':>7s}"
        lines.append(f"{o.op:>9s} {o.ns_per_op:8.1f} {cycles}  {'bitwise equal to NumPy' if o.bitwise_equal else 'WRONG'}")
    return "\n".join(lines)


def arithmetic_table(record: BytesInFlight) -> str:
    """Each kernel's extra arithmetic per trip, the latency its loads see, and the share of the trip with loads in flight."""
    lines = [f"{'kernel':15s} {'arithmetic':>18s} {'extra per trip':>14s} {'loaded latency':>14s} {'in flight':>9s}"]
    for k in [*record.kernels, *record.diagnostics]:
        shape = SHAPES.get(k.name) or DIAGNOSTICS.get(k.name)
        extra, latency = record.arithmetic_ns(k), record.loaded_latency_ns(k)
        if shape is None or extra is None or latency is None:
            continue
        share = average_in_flight_factor(latency, extra)
        lines.append(f"{k.name:15s} {' '.join(shape.chain) or '-':>18s} {extra:11.1f} ns {latency:11.0f} ns "
                     f"{share:9.1%}")
    return "\n".join(lines)


@dataclass(frozen=True)
class TwoByTwo:
    """The 2x2's ratios (times, three kernels over fused, or 4-byte over 16-byte); None where a corner is missing."""

    fusion_4_byte: float | None  # three kernels / fused, one element per thread
    fusion_16_byte: float | None  # three kernels / fused, one float4 per thread
    width_three_kernels: float | None  # 4-byte / 16-byte, three kernels
    width_fused: float | None  # 4-byte / 16-byte, fused
    both: float | None  # three 4-byte kernels / fused 16-byte kernel


def two_by_two(record: BytesInFlight) -> TwoByTwo:
    """The 2x2's ratios: fused against three kernels at each width, and width against width."""
    t = {name: record.pipeline(name).median_ms for name in PIPELINES}

    def ratio(x: str, y: str) -> float | None:
        return None if not t[x] or not t[y] else t[x] / t[y]

    return TwoByTwo(
        fusion_4_byte=ratio("three kernels, 4-byte", "fused, 4-byte"),
        fusion_16_byte=ratio("three kernels, 16-byte", "fused, 16-byte"),
        width_three_kernels=ratio("three kernels, 4-byte", "three kernels, 16-byte"),
        width_fused=ratio("fused, 4-byte", "fused, 16-byte"),
        both=ratio("three kernels, 4-byte", "fused, 16-byte"),
    )


def same_in_flight_table(record: BytesInFlight) -> str:
    """Kernels against the resident-grid probe of the same mix, width and bytes in flight (one access per thread, 8 blocks per SM)."""
    lines = [f"{'kernel':20s} {'grid':>8s} {'mix':>5s} {'width':>5s} {'in flight/SM':>12s} {'GB/s':>6s}  "
             "resident probe, same bytes in flight"]
    for k in [*record.kernels, *record.diagnostics]:
        if not k.gbs or k.groups_in_flight != 1:
            continue
        probe = [p.gbs for p in record.probes if p.grid == "resident" and p.reads == k.reads and p.unroll == 1
                 and p.width_bytes == k.width_bytes and p.bytes_in_flight_per_sm == k.bytes_in_flight_per_sm and p.gbs]
        seen = f"{probe[0]:6.0f} GB/s (kernel {100 * (k.gbs / probe[0] - 1):+.1f}%)" if probe else "-"
        lines.append(f"{k.name:20s} {k.grid:>8s} {k.reads:>3d}:1 {k.width_bytes:>4d}B {_kib(k.bytes_in_flight_per_sm):>8s} KiB "
                     f"{k.gbs:6.0f}  {seen}")
    return "\n".join(lines)

if __name__ == "__main__":
    raise SystemExit(main())
