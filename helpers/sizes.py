"""Problem sizes that suit the backend.

On a GPU, arrays must be large enough to fill the device and to spill out of its
L2 cache (about 60 MB on an H200), or we would time the cache.  The simulator runs
only a few thousand GPU threads per second, so there sizes stay tiny -- and are
chosen *not* to be multiples of the block size, so bounds guards are exercised.
"""

from __future__ import annotations

from .backend import is_simulator

BLOCK_SIZE = 256
"""Threads per block used throughout the series (a multiple of the 32-thread warp)."""

GPU_DEFAULT_SIZE = 2**26  # 256 MiB per float32 array: four times an H200's L2, and more
SIMULATOR_DEFAULT_SIZE = 1000  # about a quarter of a second per simulated launch


def default_size() -> int:
    """Elements per array for the lesson notebooks on this backend."""
    return SIMULATOR_DEFAULT_SIZE if is_simulator() else GPU_DEFAULT_SIZE


def blocks_for(n: int, block_size: int = BLOCK_SIZE) -> int:
    """Blocks needed so that ``blocks * block_size >= n`` (one thread per element)."""
    if n <= 0:
        raise ValueError(f"n must be positive to launch a kernel, got n = {n}")
    return (n + block_size - 1) // block_size
