"""Honest GPU timing: CUDA events, warm-up, many repeats, median and spread.

In the simulator kernels run as Python threads, so a wall-clock time says nothing
about a GPU: :func:`time_gpu` and :func:`copy_bandwidth` say so and return ``None``
instead of a number, and the GPU-only building blocks (:func:`event_samples`,
:func:`hold_gpu`, :func:`us_per_hold_iteration`) raise :class:`TimingNeedsGPU`.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from .backend import is_simulator
from .device import l2_bytes, sm_count
from .sizes import BLOCK_SIZE

SIMULATOR_MESSAGE = (
    "timing skipped: the CUDA simulator runs each GPU thread as Python code, "
    "so its times say nothing about a GPU"
)


class TimingNeedsGPU(RuntimeError):
    """A function that times GPU work was called in the simulator, where there is nothing to time."""


def _needs_gpu(what: str) -> None:
    """Raise :class:`TimingNeedsGPU` in the simulator, naming ``what`` and the function that works there."""
    if is_simulator():
        raise TimingNeedsGPU(f"{what} needs a GPU: the CUDA simulator has no GPU clock to time against. "
                             "time_gpu works on either backend (in the simulator it runs the work once "
                             "and returns None)")


def _whole(name: str, value: Any, least: int) -> int:
    """``value`` if it is a whole number >= ``least``; else a ``ValueError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


def _callable(run: Any, caller: str) -> None:
    if not callable(run):
        raise TypeError(f"{caller} needs a function to call, got {type(run).__name__}: did you call the "
                        "function instead of passing it? Write e.g. "
                        f"`{caller}(lambda: run_fused(a, b, c, s, out))`.")


@dataclass
class Timing:
    """Per-repeat times of one GPU workload, in milliseconds (at least one, none negative)."""

    label: str
    samples_ms: list[float]
    launch_hidden: bool | None = None  # each repeat queued behind a hold (GPU time alone); None: not said

    def __post_init__(self) -> None:
        if isinstance(self.samples_ms, (str, bytes)) or not hasattr(self.samples_ms, "__len__") \
                or len(self.samples_ms) == 0:
            raise ValueError(f"Timing {self.label!r} needs samples_ms, a non-empty list of times in "
                             f"milliseconds, got {self.samples_ms!r}: time at least one repeat")
        for i, sample in enumerate(self.samples_ms):
            number = isinstance(sample, (int, float, np.integer, np.floating)) and not isinstance(sample, bool)
            if not number or not math.isfinite(sample) or sample < 0:
                raise ValueError(f"sample {i} of Timing {self.label!r} is {sample!r}: a time is a finite number "
                                 "of milliseconds >= 0 (CUDA events in the simulator give -1: time on a GPU)")

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
        if self.median_ms == 0:
            raise ValueError(f"{self.label}: the median time is 0 ms, too short for the clock to see, so it gives "
                             "no bandwidth; time more work per repeat (a larger n)")
        return nbytes / (self.median_ms * 1e-3) / 1e9

    def __str__(self) -> str:
        return (
            f"{self.label}: median {format_ms(self.median_ms)} "
            f"(IQR {format_ms(self.spread_ms)}, {len(self.samples_ms)} repeats)"
        )


def format_ms(ms: float) -> str:
    """A time in the unit that reads best: µs below a millisecond."""
    return f"{ms * 1e3:.1f} µs" if ms < 1 else f"{ms:.3f} ms"


MIN_HOLD_US = 200.0
MAX_HOLD_US = 5_000.0


@lru_cache(maxsize=1)
def hold_kernel() -> Any:
    """The kernel that holds a stream: ``hold_kernel()[1, 1, stream](iterations)``, about
    :func:`us_per_hold_iteration` microseconds an iteration (compiled on first use)."""
    from numba import cuda

    @cuda.jit
    def hold(iterations):  # one thread sleeping: keeps the stream busy, the SMs free
        for _ in range(iterations):
            cuda.nanosleep(1000)

    return hold


@lru_cache(maxsize=1)
def us_per_hold_iteration() -> float:
    """Microseconds one iteration of the hold kernel lasts on this GPU (measured once)."""
    _needs_gpu("us_per_hold_iteration")
    from numba import cuda

    hold = hold_kernel()
    hold[1, 1](10)
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    start.record()
    hold[1, 1](2000)
    end.record()
    end.synchronize()
    return max(cuda.event_elapsed_time(start, end) * 1e3 / 2000, 0.05)


def hold_gpu(microseconds: float) -> None:
    """Queue a kernel that keeps the GPU's stream busy for about this long."""
    if isinstance(microseconds, bool) or not isinstance(microseconds, (int, float, np.integer, np.floating)) \
            or not 0 <= microseconds < math.inf:
        raise ValueError(f"microseconds must be a finite number >= 0, got {microseconds!r}")
    _needs_gpu("hold_gpu")
    hold_kernel()[1, 1](math.ceil(microseconds / us_per_hold_iteration()))


def host_enqueue_samples_us(run: Callable[[], object], samples: int = 5) -> list[float]:
    """Host time to issue ``run``, in microseconds, once per sample, the GPU idle before each (a kernel's launch cost)."""
    _callable(run, "host_enqueue_us")
    samples = _whole("samples", samples, 1)
    from numba import cuda

    costs = []
    for _ in range(samples):
        cuda.synchronize()
        started = time.perf_counter()
        run()
        costs.append((time.perf_counter() - started) * 1e6)
    cuda.synchronize()
    return costs


def host_enqueue_us(run: Callable[[], object], samples: int = 5) -> float:
    """Median host time to issue ``run`` with the GPU idle (its launch cost, for kernels)."""
    return statistics.median(host_enqueue_samples_us(run, samples))


FLUSH_FACTOR = 4  # an L2 flush reads this many L2 sizes of other data


@lru_cache(maxsize=1)
def l2_flush() -> Callable[[], None]:
    """A function that queues an L2 flush: one kernel reading ``FLUSH_FACTOR`` L2 sizes of zeros, which evicts
    whatever an earlier repeat left there and leaves only clean lines (buffer and kernel made on first use)."""
    _needs_gpu("l2_flush")
    from numba import cuda

    @cuda.jit
    def read_all(buffer, sink):  # grid-stride: every element read once
        total = 0.0
        for i in range(cuda.grid(1), buffer.size, cuda.gridsize(1)):
            total += buffer[i]
        if total == -1.0:  # never true for the zero-filled buffer; stops the reads being removed
            sink[0] = total

    buffer = cuda.to_device(np.zeros(FLUSH_FACTOR * (l2_bytes() or 64 << 20) // 4, dtype=np.float32))
    sink, blocks = cuda.device_array(1, np.float32), 4 * (sm_count() or 1)

    def flush() -> None:
        read_all[blocks, BLOCK_SIZE](buffer, sink)

    flush()
    cuda.synchronize()
    return flush


def time_gpu(run: Callable[[], object], *, label: str = "", repeats: int = 50, warmup: int = 3,
             hide_launch: bool = True, flush_l2: bool = False) -> Timing | None:
    """Time ``run`` (which launches GPU work on device arrays) with CUDA events.

    The warm-up calls keep JIT compilation and first-touch costs out of the numbers.
    With ``hide_launch`` (the default) each repeat is queued behind a short hold
    kernel, so the host's cost of issuing the launches (tens of microseconds for a
    Numba launch) happens while the GPU is still busy: the events then time the GPU
    work alone.  Host-synchronous work (a pageable copy, say) gains nothing from a
    hold and gets none.  ``hide_launch=False`` times what a Python loop sees with
    the GPU idle between calls, launch cost included.  With ``flush_l2`` each repeat
    starts with L2 flushed (:func:`l2_flush`, outside the timed span), so a workload that
    fits in L2 is read from DRAM as it would be the first time.  In the simulator ``run``
    is called once (so that its code is exercised and its errors show), then ``None``
    is returned, after saying why.
    """
    _callable(run, "time_gpu")
    repeats, warmup = _whole("repeats", repeats, 1), _whole("warmup", warmup, 0)
    if is_simulator():
        run()  # once, for correctness: the simulator's time says nothing about a GPU
        print(SIMULATOR_MESSAGE)
        return None
    from numba import cuda

    for _ in range(warmup):
        run()
    cuda.synchronize()
    hold_us = 0.0
    if hide_launch:
        enqueue_us = host_enqueue_us(run)
        if 5 * enqueue_us <= MAX_HOLD_US:
            hold_us = max(MIN_HOLD_US, 5 * enqueue_us)
    return Timing(label, event_samples(run, repeats, hold_us=hold_us, before=l2_flush() if flush_l2 else None),
                  launch_hidden=hold_us > 0)


def event_samples(run: Callable[[], object], repeats: int, *, hold_us: float = 0.0,
                  before: Callable[[], object] | None = None) -> list[float]:
    """Milliseconds between CUDA events around each of ``repeats`` calls of ``run``.

    ``before`` runs first in each repeat (an L2 flush, say), then a hold of
    ``hold_us`` if asked (see :func:`time_gpu`), then the timed call.  It needs a GPU.
    """
    _callable(run, "event_samples")
    repeats = _whole("repeats", repeats, 1)
    _needs_gpu("event_samples")
    from numba import cuda

    start, end = cuda.event(), cuda.event()
    samples = []
    for _ in range(repeats):
        if before is not None:
            before()
        if hold_us:
            hold_gpu(hold_us)
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(cuda.event_elapsed_time(start, end))
    return samples


def library_copy(source: object, target: object) -> tuple[Callable[[], object], str]:
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


def copy_bandwidth(n: int, dtype: type = np.float32, repeats: int = 50,
                   flush_l2: bool = False) -> tuple[Timing, float] | None:
    """The device-to-device copy ceiling: timing and GB/s counting bytes read plus written (L2 flushed before
    each repeat with ``flush_l2``).

    The timing's label names the copy used (see :func:`library_copy`).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"n must be a positive whole number of elements to copy, got {n!r}")
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    from numba import cuda

    source = cuda.to_device(np.random.default_rng().random(n).astype(dtype))
    target = cuda.device_array_like(source)
    copy, method = library_copy(source, target)
    copy()
    cuda.synchronize()
    if not np.array_equal(target.copy_to_host(), source.copy_to_host()):
        raise RuntimeError(f"{method} did not copy the array correctly")
    timing = time_gpu(copy, label=f"device-to-device copy ({method})", repeats=repeats, flush_l2=flush_l2)
    assert timing is not None
    return timing, timing.bandwidth_gbs(2 * source.nbytes)
