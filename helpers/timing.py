"""Honest GPU timing: CUDA events, warm-up, many repeats, median and spread.

In the simulator kernels run as Python threads, so a wall-clock time says nothing
about a GPU: the functions here say so and return ``None`` instead of a number.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .backend import is_simulator

SIMULATOR_MESSAGE = (
    "timing skipped: the CUDA simulator runs each GPU thread as Python code, "
    "so its times say nothing about a GPU"
)


@dataclass
class Timing:
    """Per-repeat times of one GPU workload, in milliseconds."""

    label: str
    samples_ms: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def spread_ms(self) -> float:
        """Interquartile range: how far typical repeats sit from each other."""
        q1, _, q3 = np.percentile(self.samples_ms, [25, 50, 75])
        return float(q3 - q1)

    def bandwidth_gbs(self, nbytes: int) -> float:
        """GB/s achieved if ``nbytes`` were moved in the median time."""
        return nbytes / (self.median_ms * 1e-3) / 1e9

    def __str__(self) -> str:
        return (
            f"{self.label}: median {format_ms(self.median_ms)} "
            f"(IQR {format_ms(self.spread_ms)}, {len(self.samples_ms)} repeats)"
        )


def format_ms(ms: float) -> str:
    """A time in the unit that reads best: µs below a millisecond."""
    return f"{ms * 1e3:.1f} µs" if ms < 1 else f"{ms:.3f} ms"


def time_gpu(run: Callable[[], object], *, label: str = "", repeats: int = 50, warmup: int = 3) -> Timing | None:
    """Time ``run`` (which launches GPU work on device arrays) with CUDA events.

    The warm-up calls keep JIT compilation and first-touch costs out of the numbers.
    Returns ``None`` in the simulator, after saying why.
    """
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    from numba import cuda

    for _ in range(warmup):
        run()
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    samples = []
    for _ in range(repeats):
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(cuda.event_elapsed_time(start, end))
    return Timing(label, samples)


def _copy_function(source: object, target: object) -> tuple[Callable[[], object], str]:
    """The fastest device-to-device copy at hand, and its name.

    CuPy's and PyTorch's copies run as kernels with 16-byte accesses.  Numba's own
    ``copy_to_device`` calls ``cuMemcpyDtoD``, which uses the copy engines and
    reached only about 1.5-2.9 TB/s on an H200 where the kernels reached about 4
    (measured for this project, 2026-12-02), so it is the fallback.
    """
    try:
        import cupy

        src, dst = cupy.asarray(source), cupy.asarray(target)
        return (lambda: cupy.copyto(dst, src)), "CuPy copyto"
    except ImportError:
        pass
    try:
        import torch

        src_t, dst_t = torch.as_tensor(source, device="cuda"), torch.as_tensor(target, device="cuda")
        return (lambda: dst_t.copy_(src_t)), "PyTorch copy_"
    except ImportError:
        pass
    return (lambda: target.copy_to_device(source)), "cuMemcpyDtoD"  # type: ignore[attr-defined]


def copy_bandwidth(n: int, dtype: type = np.float32, repeats: int = 50) -> tuple[Timing, float] | None:
    """The device-to-device copy ceiling: timing and GB/s counting bytes read plus written.

    The timing's label names the copy used (see :func:`_copy_function`).
    """
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    from numba import cuda

    source = cuda.to_device(np.random.default_rng().random(n).astype(dtype))
    target = cuda.device_array_like(source)
    copy, method = _copy_function(source, target)
    copy()
    cuda.synchronize()
    if not np.array_equal(target.copy_to_host(), source.copy_to_host()):
        raise RuntimeError(f"{method} did not copy the array correctly")
    timing = time_gpu(copy, label=f"device-to-device copy ({method})", repeats=repeats)
    assert timing is not None
    return timing, timing.bandwidth_gbs(2 * source.nbytes)
