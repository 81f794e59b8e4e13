"""The bytes-in-flight model's arithmetic (no GPU needed): Little's law, occupancy, the curve read as a prediction.

A memory system that answers a load after a latency ``L`` delivers at most the bytes waiting for an
answer divided by that latency: ``bandwidth = bytes in flight / latency`` (until the device's limit).
:data:`SHAPES` says how each of the series' kernels meets memory.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from helpers.device import resident_blocks_per_sm, sm_limits
from helpers.sizes import BLOCK_SIZE

WIDTHS = (4, 16)
"""Bytes per access of the probes (a float, a float4)."""
READS = (1, 2, 3)
"""Arrays the probes read for each one they write: the read/write mixes of the curve."""
NEAR_PERCENT = 10.0  # each prediction should land within 10% of its measurement


def threads_per_sm(registers: int | None, block_size: int = BLOCK_SIZE, blocks_launched_per_sm: int | None = None) -> int:
    """Resident threads per SM: blocks that fit (registers, threads, block limit), capped by
    ``blocks_launched_per_sm`` (a grid of fewer blocks than fit), x block size."""
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
    most = sm_limits()["threads"]
    if threads > most:
        raise ValueError(f"an SM holds at most {most} threads, got {threads}")
    return loads_per_thread * bytes_per_load * threads


def littles_law_gbs(in_flight_per_sm: float, sms: int, latency_ns: float, reads: int = 1, writes: int = 0) -> float:
    """Read+write GB/s that ``in_flight_per_sm`` read bytes sustain over ``latency_ns`` on ``sms`` SMs
    (reads arrive at ``sms * in_flight / latency`` bytes per ns; the writes ride along)."""
    if latency_ns <= 0 or sms < 1 or reads < 1 or writes < 0:
        raise ValueError("latency_ns and sms must be positive, reads at least 1, writes not negative")
    return sms * in_flight_per_sm / latency_ns * (reads + writes) / reads


def implied_latency_ns(in_flight_per_sm: float, sms: int, read_gbs: float) -> float:
    """Little's law solved for the latency: what a measured read rate implies (ns)."""
    if read_gbs <= 0:
        raise ValueError("read_gbs must be positive")
    return sms * in_flight_per_sm / read_gbs


def curve_points(probes: Iterable[Any], reads: int, width_bytes: int | None = None) -> list[tuple[float, float]]:
    """The measured curve (bytes in flight per SM, read+write GB/s) for one mix, from the resident-grid probes
    (whose occupancy is set); probes of equal bytes in flight merged by their median; ``width_bytes=None`` pools
    both widths."""
    by_q: dict[int, list[float]] = {}
    for p in probes:
        if p.reads != reads or p.gbs is None or not p.bitwise_equal or p.grid != "resident":
            continue
        if width_bytes is not None and p.width_bytes != width_bytes:
            continue
        by_q.setdefault(p.bytes_in_flight_per_sm, []).append(p.gbs)
    return [(float(q), statistics.median(v)) for q, v in sorted(by_q.items())]


def read_curve(points: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """The curve as the model reads it: bytes in flight, and the bandwidth made non-decreasing (see :func:`predict_gbs`)."""
    qs = np.array([q for q, _ in points], dtype=float)
    return qs, np.maximum.accumulate(np.array([g for _, g in points], dtype=float))


def predict_gbs(points: list[tuple[float, float]], in_flight_per_sm: float) -> float | None:
    """The curve read at ``in_flight_per_sm``: linear in log(bytes in flight) between measured points.

    The curve is first made non-decreasing (a dip is noise or another limit); below the smallest point the
    rate scales in proportion (Little's law), above the largest it stays flat (the device's limit).
    """
    if not points:
        return None
    if in_flight_per_sm <= 0:
        raise ValueError("in_flight_per_sm must be positive")
    qs, bw = read_curve(points)
    if in_flight_per_sm <= qs[0]:
        return float(bw[0] * in_flight_per_sm / qs[0])
    if in_flight_per_sm >= qs[-1]:
        return float(bw[-1])
    return float(np.interp(np.log(in_flight_per_sm), np.log(qs), bw))


def average_in_flight_factor(latency_ns: float, other_ns: float) -> float:
    """The share of a trip a thread has its loads in flight: ``latency / (latency + other)``.

    Little's law holds for the *average* bytes in flight: a thread spending ``other_ns`` per trip between its
    loads' arrival and its next loads has nothing in flight then (negative: less work than the probes did).
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


# --- the series' kernels, as the model sees them -----------------------------------------------


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

PIPELINES = {
    "three kernels, 4-byte": (4, ["add", "multiply", "scale"], 32),
    "fused, 4-byte": (4, ["naive"], 16),
    "three kernels, 16-byte": (16, ["add_vec4", "multiply_vec4", "scale_vec4"], 32),
    "fused, 16-byte": (16, ["vec4"], 16),
}
"""The 2x2: {one element per thread, one float4 per thread} x {three kernels, fused}."""

