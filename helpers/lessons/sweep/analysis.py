"""Reading a size sweep (a :class:`~helpers.lessons.sweep.record.Sweep`): runtime series, bandwidth, speedups,
and the three regimes, read off the measured curve so the notebook, the plots and the checks agree.

* **launch-bound**: doubling ``n`` barely changes the time (the fixed cost of each launch dominates);
* **L2-resident**: the working set fits in the L2 (warm clearly faster than flushed, when both are measured);
* **DRAM-bound**: past the L2, time grows in step with the bytes moved.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from helpers.harness.tables import power_label

from .record import ImplementationInfo, Sweep

LAUNCH_BOUND = "launch-bound"
L2_RESIDENT = "L2-resident"
DRAM_BOUND = "DRAM-bound"
TRANSITION = "transition"

FLAT_GROWTH = 1.25
"""Time grows by less than this factor when n doubles: launch-bound."""
DRAM_GROWTH = 1.6
"""Time grows by at least this factor when n doubles (2.0 is perfect proportionality): bandwidth-bound."""
L2_SPEEDUP = 0.8
"""A warm-cache time below this fraction of the cold-cache time: the data came from L2."""

MODES = {
    "loop": "a Python loop's view: CUDA events around each call with the GPU idle, launch overhead included",
    "gpu": "GPU time only: launches queued behind a short wait kernel, so host launch cost is hidden; "
    "buffers reused, so a working set that fits in L2 stays there between repeats",
    "gpu_cold": "GPU time only, with the L2 flushed (a 4x-L2 buffer read) before every repeat: data come from DRAM",
    "cpu": "NumPy on the host, timed with time.perf_counter",
}

MODE_NAMES = {"loop": "Python loop", "gpu": "GPU time, L2 warm", "gpu_cold": "GPU time, L2 flushed", "cpu": "host"}


def _as_arrays(sizes: Sequence[float], times: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(times, dtype=float)
    if n.ndim != 1 or t.shape != n.shape:
        raise ValueError(f"sizes and times must be 1-D and of equal length, got {n.shape} and {t.shape}")
    if n.size < 2:
        raise ValueError("need at least two sizes to see how time grows with n")
    if np.any(np.diff(n) <= 0):
        raise ValueError("sizes must be strictly increasing")
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("times must be positive, finite numbers")
    return n, t


def growth_per_doubling(sizes: Sequence[float], times: Sequence[float]) -> np.ndarray:
    """At each size, the factor by which time grows when n doubles (1 = flat, 2 = proportional), from the
    geometric mean of the segments on both sides (one at the ends)."""
    n, t = _as_arrays(sizes, times)
    segment = np.log2(t[1:] / t[:-1]) / np.log2(n[1:] / n[:-1])  # log-log slope of each segment
    slope = np.empty_like(n)
    slope[0], slope[-1] = segment[0], segment[-1]
    slope[1:-1] = (segment[:-1] + segment[1:]) / 2
    return 2.0**slope


def classify_regimes(sizes: Sequence[float], times_ms: Sequence[float], working_set_bytes: Sequence[float],
                     l2_bytes: float, *, cold_times_ms: Sequence[float] | None = None, flat: float = FLAT_GROWTH,
                     dram: float = DRAM_GROWTH, l2_speedup: float = L2_SPEEDUP) -> list[str]:
    """Label every size of one runtime curve with its regime.

    ``working_set_bytes[i]`` is the distinct memory touched at ``sizes[i]``.  With ``cold_times_ms`` (the L2
    flushed first) a size is L2-resident only when warm is clearly faster *and* the working set fits.
    """
    n, t = _as_arrays(sizes, times_ms)
    ws = np.asarray(working_set_bytes, dtype=float)
    if ws.shape != n.shape:
        raise ValueError("working_set_bytes must have one entry per size")
    if not l2_bytes or l2_bytes <= 0:
        raise ValueError("l2_bytes must be the L2 cache size in bytes (a positive number)")
    cold = None
    if cold_times_ms is not None:
        _, cold = _as_arrays(sizes, cold_times_ms)
    growth = growth_per_doubling(n, t)
    labels = []
    for i in range(n.size):
        fits = ws[i] <= l2_bytes
        if growth[i] < flat:
            labels.append(LAUNCH_BOUND)
        elif fits and (cold is None or t[i] < l2_speedup * cold[i]):
            labels.append(L2_RESIDENT)
        elif not fits and growth[i] >= dram:
            labels.append(DRAM_BOUND)
        else:
            labels.append(TRANSITION)
    return labels


def regime_spans(sizes: Sequence[int], labels: Sequence[str]) -> list[tuple[str, int, int]]:
    """Runs of equal labels as ``(regime, first n, last n)``, in order of n."""
    if len(sizes) != len(labels):
        raise ValueError("one label per size")
    spans: list[tuple[str, int, int]] = []
    for size, label in zip(sizes, labels):
        if spans and spans[-1][0] == label:
            spans[-1] = (label, spans[-1][1], int(size))
        else:
            spans.append((label, int(size), int(size)))
    return spans


def has_timings(sweep: Sweep) -> bool:
    """False for a simulator sweep, which checks correctness and times nothing."""
    return bool(sweep.measurements)


def implementation_info(sweep: Sweep, label: str) -> ImplementationInfo:
    try:
        return sweep.implementations[label]
    except KeyError:
        known = ", ".join(sweep.implementations) or "none"
        raise KeyError(f"no implementation '{label}' in this sweep (it has: {known})") from None


def series(sweep: Sweep, label: str, mode: str = "loop") -> tuple[np.ndarray, np.ndarray]:
    """Sizes and median times (ms) of one implementation in one mode, by n (a CPU one has only ``cpu``)."""
    if implementation_info(sweep, label).device == "cpu":
        mode = "cpu"
    rows = sorted((m.n, m.median_ms) for m in sweep.measurements if m.implementation == label and m.mode == mode)
    return np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=float)


def median_at(sweep: Sweep, label: str, n: int, mode: str = "loop") -> float | None:
    sizes, times = series(sweep, label, mode)
    hit = np.flatnonzero(sizes == n)
    return float(times[hit[0]]) if hit.size else None


def bytes_moved(sweep: Sweep, label: str, n: np.ndarray | int) -> np.ndarray:
    """Bytes the implementation moves at size n, from its counted bytes per element."""
    return np.asarray(n, dtype=float) * implementation_info(sweep, label).bytes_per_element


def bandwidth_gbs(sweep: Sweep, label: str, mode: str = "loop") -> tuple[np.ndarray, np.ndarray]:
    """Sizes and achieved GB/s (counted bytes over median time)."""
    sizes, times = series(sweep, label, mode)
    return sizes, bytes_moved(sweep, label, sizes) / (times * 1e-3) / 1e9


def copy_gbs(sweep: Sweep, mode: str = "gpu_cold", label: str = "device copy") -> float | None:
    """The device-to-device copy's GB/s at the largest size measured."""
    if label not in sweep.implementations:
        return None
    sizes, gbs = bandwidth_gbs(sweep, label, mode)
    return float(gbs[-1]) if sizes.size else None


def speedup(sweep: Sweep, slow: str, fast: str, mode: str = "loop") -> tuple[np.ndarray, np.ndarray]:
    """Sizes measured for both, and time(slow) / time(fast)."""
    n1, t1 = series(sweep, slow, mode)
    n2, t2 = series(sweep, fast, mode)
    common, i1, i2 = np.intersect1d(n1, n2, return_indices=True)
    return common, t1[i1] / t2[i2]


def regimes_of(sweep: Sweep, label: str, mode: str = "gpu") -> list[str]:
    """Regime labels of one implementation's curve (for ``gpu``, ``gpu_cold`` is the cold reference)."""
    sizes, times = series(sweep, label, mode)
    info = implementation_info(sweep, label)
    l2 = sweep.settings.l2_bytes
    if sizes.size < 2 or not l2:
        return []
    cold = None
    if mode == "gpu":
        cold_sizes, cold_times = series(sweep, label, "gpu_cold")
        if np.array_equal(cold_sizes, sizes):
            cold = cold_times
    working_set = sizes.astype(float) * info.working_set_per_element
    return classify_regimes(sizes, times, working_set, l2, cold_times_ms=cold)
