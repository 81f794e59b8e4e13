"""Correctness checks: fresh random inputs, poisoned outputs, comparison with NumPy.

Zeros hide bugs (an unwritten output already looks right), so inputs are random
and every output buffer is filled with NaN before a kernel runs: an element the
kernel never wrote stays NaN and is reported by index.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

POISON = np.nan


class CheckFailed(AssertionError):
    """A kernel's result is wrong; the message says where and how."""


def _length(n: Any) -> int:
    """``n`` as a positive int, or an error saying what is wrong with it."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be a whole number of elements, got {n!r} ({type(n).__name__})")
    if n <= 0:
        raise ValueError(f"n must be positive, got n = {n}: an empty array has nothing to check")
    return int(n)


def random_inputs(n: int, count: int = 3, *, dtype: Any = np.float32, seed: int | None = None,
                  low: float = 0.5, high: float = 2.0) -> list[np.ndarray]:
    """``count`` fresh random host arrays of length ``n`` (a new draw unless ``seed`` is given).

    The values are uniform in ``[low, high)``, with ``low < high``, in a floating-point ``dtype``.
    """
    n = _length(n)
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"count must be a whole number >= 1 (how many arrays to draw), got {count!r}")
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"random_inputs() draws floating-point values, got dtype {dtype}: values in [{low}, {high}) "
                        "would be truncated to a few repeated numbers. Use a float dtype; for random integers, "
                        "np.random.default_rng().integers(low, high, n)")
    for name, bound in (("low", low), ("high", high)):
        if isinstance(bound, (bool, np.bool_)) or not isinstance(bound, (int, float, np.integer, np.floating)) \
                or not np.isfinite(bound):
            raise ValueError(f"{name} must be a finite number, got {bound!r}")
    if not low < high:
        raise ValueError(f"low must be below high, got low = {low}, high = {high}: the values are drawn from "
                         "[low, high), and equal bounds would give uniform inputs, which hide bugs")
    rng = np.random.default_rng(seed)
    if dtype in (np.float32, np.float64):  # draw in the target precision: 2^28 float32s in a second or two
        return [(rng.random(n, dtype=dtype) * dtype.type(high - low) + dtype.type(low)) for _ in range(count)]
    return [rng.uniform(low, high, n).astype(dtype) for _ in range(count)]


def poisoned(n: int, dtype: Any = np.float32) -> Any:
    """A device array of length ``n`` filled with NaN, so unwritten elements stand out.

    ``dtype`` must be a floating-point type: an integer array cannot hold NaN.
    """
    n, dtype = _length(n), np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"poisoned() needs a floating-point dtype (NaN marks unwritten elements); got {dtype}")
    return cuda.to_device(np.full(n, POISON, dtype=dtype))


def poison(array: Any) -> Any:
    """Refill an existing device array with NaN and return it."""
    if np.dtype(array.dtype).kind != "f":
        raise TypeError(f"poison() needs a floating-point array (NaN marks unwritten elements); got {array.dtype}")
    array.copy_to_device(np.full(array.shape, POISON, dtype=array.dtype))
    return array


def default_tolerance(dtype: Any) -> float:
    """Relative tolerance for a result of this dtype (float32 rounding, with headroom)."""
    return {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-5}.get(np.dtype(dtype), 1e-12)


def check_close(result: Any, expected: np.ndarray, *, name: str = "out", rtol: float | None = None) -> None:
    """Raise :class:`CheckFailed` naming the first bad element, or return quietly."""
    if result is None:
        raise CheckFailed(f"`{name}` is None: pass the output array itself (kernels write into it "
                          "and return nothing)")
    expected = np.asarray(expected)
    got = result.copy_to_host() if hasattr(result, "copy_to_host") else np.asarray(result)
    if got.shape != expected.shape:
        raise CheckFailed(f"`{name}` has shape {got.shape}, expected {expected.shape}")
    unwritten = np.flatnonzero(np.isnan(got) & ~np.isnan(expected))
    if unwritten.size:
        raise CheckFailed(
            f"element {unwritten[0]} of `{name}` was never written ({unwritten.size} of {got.size} "
            "elements still hold the poison value): check your bounds guard and launch size"
        )
    rtol = default_tolerance(expected.dtype) if rtol is None else rtol
    bad = np.flatnonzero(~np.isclose(got, expected, rtol=rtol, atol=0, equal_nan=True))
    if bad.size:
        i = bad[0]
        raise CheckFailed(
            f"element {i} of `{name}` is {got[i]!r}, expected {expected[i]!r} "
            f"({bad.size} of {got.size} elements differ beyond rtol={rtol:g})"
        )
