"""Softmax at the memory limit: 16-byte loads, a row per warp (or per few warps), several rows per block.

:func:`make_softmax_kernel` gives each row a block and reads it four bytes at a time.  Here a row
belongs to ``lanes`` threads: one warp for a short row, whose maximum and sum are then warp
shuffles alone, or a few warps for a long one (one exchange through shared memory).  A block
holds ``rows_per_block`` rows, so short rows still make blocks of a useful size.  Every access
is a ``float4``: a quarter of the load and store instructions, which needs rows of a multiple
of 4 columns and 16-byte-aligned arrays.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numba import cuda, float32, types

from helpers.backend import is_simulator
from helpers.checks import poisoned
from helpers.counting.ptx import compile_shapes
from helpers.ledger import Ledger
from helpers.lessons.roofline.kernels import load4, require_flat_and_aligned, store4
from helpers.validate import require_whole

from .kernels import WARP, _require_matrix, fits, make_row_reductions
from .record import SoftmaxBench, committed_fastest, nearest


@dataclass(frozen=True)
class VectorConfig:
    """``lanes`` threads per row (a power of two up to 1024), ``rows_per_block`` rows per block."""

    lanes: int = 32
    rows_per_block: int = 4

    def threads(self) -> int:
        return self.lanes * self.rows_per_block

    def check(self, cols: int) -> None:
        lanes = require_whole("lanes", self.lanes, high=1024)
        require_whole("rows_per_block", self.rows_per_block, high=1024)
        if lanes & (lanes - 1):
            raise ValueError(f"lanes ({lanes}) must be a power of two: the row's reduction halves it")
        if self.threads() % WARP or self.threads() > 1024:
            raise ValueError(f"lanes x rows_per_block ({self.threads()}) must be whole warps, at most 1024")
        if cols % 4:
            raise ValueError(f"rows of {cols} columns: the 16-byte kernel needs a multiple of 4 (use run_fused)")
        if cols // 4 > 16 * lanes:
            raise ValueError(f"a row of {cols} columns is over 16 float4s for each of {lanes} lanes: use more lanes")


VECTOR_CONFIG = r"numba 16-byte, (\d+) lanes/row, (\d+) rows/block"  # how the softmax record names this kernel


@lru_cache(maxsize=1)
def _measured() -> dict[int, re.Match[str]]:
    """Row length -> the committed H200 record's fastest shape of this kernel (the larger row count decides)."""
    return committed_fastest(SoftmaxBench, VECTOR_CONFIG, key=lambda row: row.cols, weight=lambda row: row.rows)


def default_vector_config(cols: int) -> VectorConfig:
    """The committed fastest shape at the nearest committed row length (log scale), where it fits ``cols``;
    else a warp per row up to 2,048 columns (four rows a block), then a warp per 2,048 columns."""
    found = nearest(_measured(), cols)
    measured = VectorConfig(int(found.group(1)), int(found.group(2))) if found else None
    if measured is not None and not is_simulator() and fits(measured, cols):
        return measured
    if cols <= 2048:
        return VectorConfig(WARP, 4)
    lanes = WARP
    while cols // 4 > 16 * lanes:
        lanes *= 2
    return VectorConfig(lanes, 1)


def make_vector_softmax_kernel(n_cols, lanes, rows_per_block):
    """Softmax of rows of exactly ``n_cols`` (a multiple of 4), ``lanes`` threads per row."""
    N4, LANES, R = n_cols // 4, lanes, rows_per_block  # compile-time constants
    PER = (N4 + LANES - 1) // LANES  # float4s per thread
    VALUES, WARPS = 4 * PER, max(1, LANES // WARP)  # registers per thread; warps per row
    SCRATCH, GROUPS = (R * LANES if is_simulator() else 1), R * WARPS
    NEG = float32(-math.inf)

    warp_max, warp_sum = make_row_reductions(min(LANES, WARP))

    @cuda.jit(device=True, inline="always")
    def row_reduce(x, is_max, scratch, groups):
        """Max or sum over the row's lanes: shuffles inside a warp, then (a row of several warps) shared memory."""
        x = warp_max(x, scratch) if is_max else warp_sum(x, scratch)
        if WARPS > 1:
            t = cuda.threadIdx.x
            if t % WARP == 0:
                groups[t // WARP] = x
            cuda.syncthreads()
            first = (t // LANES) * WARPS
            x = groups[first]
            for w in range(1, WARPS):
                x = max(x, groups[first + w]) if is_max else x + groups[first + w]
            cuda.syncthreads()  # groups is used again by the next reduction
        return x

    @cuda.jit
    def vector_softmax_kernel(x, out, n_rows):
        # x, out: the matrix flattened, row after row: (n_rows * n_cols,), 16-byte aligned
        lane = cuda.threadIdx.x % LANES
        row = cuda.blockIdx.x * R + cuda.threadIdx.x // LANES
        live = row < n_rows
        scratch = cuda.shared.array(SCRATCH, float32)  # the simulator's stand-in for warp shuffles
        groups = cuda.shared.array(GROUPS, float32)
        values = cuda.local.array(VALUES, float32)  # this thread's float4s of the row, in registers
        m = NEG
        for k in range(PER):
            j = k * LANES + lane  # neighbouring lanes read neighbouring float4s
            a = b = c = d = NEG if live else float32(0)  # a row past the end: zeros, so no -inf - -inf
            if live and j < N4:
                a, b, c, d = load4(x, row * N4 + j)
            values[4 * k], values[4 * k + 1], values[4 * k + 2], values[4 * k + 3] = a, b, c, d
            m = max(m, max(max(a, b), max(c, d)))
        m = row_reduce(m, True, scratch, groups)
        s = float32(0)
        for i in range(VALUES):
            values[i] = math.exp(values[i] - m)  # exp(-inf) = 0 for the padding
            s += values[i]
        inverse = float32(1) / row_reduce(s, False, scratch, groups)
        for k in range(PER):
            j = k * LANES + lane
            if live and j < N4:
                store4(out, row * N4 + j, values[4 * k] * inverse, values[4 * k + 1] * inverse,
                       values[4 * k + 2] * inverse, values[4 * k + 3] * inverse)

    return vector_softmax_kernel


def vector_kernel(cols: int, config: VectorConfig) -> Any:
    """The kernel for this row length and shape (compiled once each, the shape checked first)."""
    return _compiled(require_whole("cols", cols), config)


@lru_cache(maxsize=None)
def _compiled(cols: int, config: VectorConfig) -> Any:
    config.check(cols)
    return make_vector_softmax_kernel(cols, config.lanes, config.rows_per_block)


def run_vector(x: Any, out: Any, config: VectorConfig | None = None) -> None:
    """One launch of the 16-byte softmax; ``out`` may be ``x``.  Contiguous, 16-byte-aligned matrices."""
    rows, cols = _require_matrix(x, out)
    require_flat_and_aligned({"x": x, "out": out}, "the 16-byte softmax")
    config = config or default_vector_config(cols)
    if not isinstance(config, VectorConfig):
        raise TypeError(f"`config` must be a VectorConfig, got {type(config).__name__}")
    kernel = vector_kernel(cols, config)
    x, out = x.reshape(rows * cols), out.reshape(rows * cols)  # row after row
    kernel[(rows + config.rows_per_block - 1) // config.rows_per_block, config.threads()](x, out, rows)


def count_vector(rows: int = 5, cols: int = 36) -> list[Ledger]:
    """The 16-byte softmax once on random rows, in a ledger (for :meth:`Ledger.counted_in_simulator`)."""
    x = cuda.to_device(np.random.default_rng().standard_normal((rows, cols)).astype(np.float32))
    out = poisoned(rows * cols).reshape(rows, cols)
    with Ledger("16-byte softmax") as ledger:
        run_vector(x, out)
    return [ledger]


def compile_request(request: dict[str, Any]) -> dict[str, str]:
    """PTX of the kernel for each ``[cols, lanes, rows_per_block]`` in ``request["shapes"]`` (run with the real
    compiler by ``helpers.counting.other_backend``; no GPU needed)."""
    array = types.Array(types.float32, 1, "C")
    return compile_shapes(request, make_vector_softmax_kernel, (array, array, types.int64))
