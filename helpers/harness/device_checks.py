"""Correctness checks that stay on the device, for the benchmarks' large arrays.

At 2^28 elements a copy to the host for every check would cost more than the timing
itself, so the benchmarks poison outputs and count mismatches with small kernels; only
a failing check copies the arrays back, to name the first bad element.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda

from helpers.checks import CheckFailed, check_close
from helpers.sizes import BLOCK_SIZE, blocks_for


@cuda.jit
def _fill_nan(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.nan


@cuda.jit
def _count_mismatches(got, expected, rtol, count):
    i = cuda.grid(1)
    if i < got.size:
        e = expected[i]
        if not abs(got[i] - e) <= rtol * abs(e):  # NaN (an unwritten element) fails too
            cuda.atomic.add(count, 0, 1)


def poison_on_device(*arrays: Any) -> None:
    """Fill device arrays with NaN on the device (no host copy, even at 2^28)."""
    for array in arrays:
        _fill_nan[blocks_for(array.size), BLOCK_SIZE](array)


def check_on_device(got: Any, expected: Any, *, name: str, rtol: float) -> None:
    """Raise :class:`CheckFailed` unless every element of ``got`` is within ``rtol`` of ``expected``.

    The first bad element is named (from a host copy, made only when the check fails).
    """
    count = cuda.to_device(np.zeros(1, dtype=np.int64))
    _count_mismatches[blocks_for(got.size), BLOCK_SIZE](got, expected, got.dtype.type(rtol), count)
    bad = int(count.copy_to_host()[0])
    if bad:
        check_close(got.copy_to_host(), expected.copy_to_host(), name=name, rtol=rtol)
        raise CheckFailed(f"{name}: {bad} elements differ from NumPy beyond rtol={rtol:g}")
