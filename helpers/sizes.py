"""Problem sizes that suit the backend.

On a GPU, arrays must be large enough to fill the device and to spill out of its
L2 cache (60 MiB on an H200), or we would time the cache.  The simulator runs
only a few thousand GPU threads per second, so there sizes stay tiny -- and are
chosen *not* to be multiples of the block size, so bounds guards are exercised.
"""

from __future__ import annotations

import numpy as np

from .backend import is_simulator

BLOCK_SIZE = 256
"""Threads per block used throughout the series (a multiple of the 32-thread warp)."""

GPU_DEFAULT_SIZE = 2**26  # 256 MiB per float32 array: four times an H200's L2, and more
SIMULATOR_DEFAULT_SIZE = 1000  # about a quarter of a second per simulated launch


def default_size() -> int:
    """Elements per array for the lesson notebooks on this backend."""
    return SIMULATOR_DEFAULT_SIZE if is_simulator() else GPU_DEFAULT_SIZE


MAX_BLOCK_SIZE = 1024
"""The most threads a CUDA block may have, on every GPU Numba supports."""


def _whole_number(name: str, value: object, what: str) -> int:
    """``value`` as an int, or a ``TypeError`` that says what to pass instead."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        hint = f" (round it: int({value!r}))" if isinstance(value, (float, np.floating)) else ""
        raise TypeError(f"{name} must be a whole number of {what}, got {value!r} ({type(value).__name__}){hint}")
    return int(value)


def blocks_for(n: int, block_size: int = BLOCK_SIZE) -> int:
    """Blocks needed so that ``blocks * block_size >= n`` (one thread per element)."""
    n = _whole_number("n", n, "elements")
    block_size = _whole_number("block_size", block_size, "threads")
    if n <= 0:
        raise ValueError(f"n must be positive to launch a kernel, got n = {n}: there are no elements to compute")
    if not 1 <= block_size <= MAX_BLOCK_SIZE:
        raise ValueError(
            f"block_size must be between 1 and {MAX_BLOCK_SIZE} threads (a CUDA block holds at most "
            f"{MAX_BLOCK_SIZE}), got {block_size}; the series uses BLOCK_SIZE = {BLOCK_SIZE}"
        )
    return (n + block_size - 1) // block_size
