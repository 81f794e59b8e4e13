"""Fused attention with register tiling: fusion removed the bytes; instruction efficiency is next.

:func:`make_flash_attention_kernel` gives each thread one query row, so every multiply-add
of ``Q K^T`` and of ``P V`` needs a value read from shared memory.  Here each thread owns a
small block of the work and reuses what it reads:

* **Scores.** A block of ``block_q`` query rows and ``block_k`` keys is split into
  ``rows x keys`` micro-tiles.  Per four head columns a thread reads four floats of each of
  its rows of Q and of each of its keys (16-byte shared loads), then does ``rows x keys x 4``
  multiply-adds from registers.
* **Online softmax in registers.** A query row's scores live in the registers of
  ``block_k / keys`` neighbouring lanes of one warp; the row maximum and the final sum are
  combined with warp shuffles, never through memory.
* **Output.** The probabilities go through a shared tile ``P`` (this block's only copy), and
  each thread accumulates ``rows x (d / lanes per row)`` outputs, again from 16-byte reads.

Threads of one row group read one address (a broadcast), and rows are padded by four
floats, so the 16-byte shared reads have no bank conflicts.  Q, K and V tiles are staged
from global memory with 16-byte loads, which needs 16-byte-aligned arrays.

Scores are computed in base 2: ``Q`` is scaled by ``log2(e) / sqrt(d)`` as it is staged, so
``exp(x)`` becomes ``exp2(x')``, one hardware instruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np
from numba import cuda, float32, types

from helpers.backend import is_simulator
from helpers.counting.ptx import compile_shapes
from helpers.ledger import Ledger
from helpers.lessons.roofline.kernels import load4, require_flat_and_aligned, store4
from helpers.lessons.softmax.kernels import fits, make_row_reductions
from helpers.validate import require_flag, require_whole

from .kernels import SHARED_ALIGN, _require_qkv, random_qkv
from .record import fastest_at_longest

SHARED_BYTES = 48 * 1024  # the static shared memory a block may hold without opting in
WARP = 32


@dataclass(frozen=True)
class TiledConfig:
    """A block of ``block_q`` query rows x ``block_k`` keys; each thread ``rows`` rows x ``keys`` keys."""

    block_q: int = 64
    block_k: int = 32
    rows: int = 4
    keys: int = 4

    def __post_init__(self) -> None:
        for name in ("block_q", "block_k", "rows", "keys"):
            require_whole(name, getattr(self, name), high=1024)

    def lanes_per_row(self) -> int:
        return self.block_k // self.keys

    def threads(self) -> int:
        return (self.block_q // self.rows) * self.lanes_per_row()

    def tile_floats(self, d: int) -> tuple[int, int, int, int]:
        """The floats of each shared tile for head size ``d``, as the kernel declares them: Q and K (rows padded
        by 4), V, and P (rows padded by 4)."""
        return self.block_q * (d + 4), self.block_k * (d + 4), self.block_k * d, self.block_q * (self.block_k + 4)

    def shared_floats(self, d: int) -> int:
        """The floats of shared memory the tiles take: :meth:`tile_floats` summed."""
        return sum(self.tile_floats(d))

    def check(self, d: int) -> None:
        """Raise ``ValueError`` naming the rule a shape breaks for head size ``d``."""
        lanes = self.lanes_per_row()
        rules = [
            (self.block_q % self.rows == 0, f"block_q ({self.block_q}) must be a multiple of rows ({self.rows})"),
            (self.block_k % self.keys == 0, f"block_k ({self.block_k}) must be a multiple of keys ({self.keys})"),
            (self.block_k % 4 == 0, f"block_k ({self.block_k}) must be a multiple of 4 (16-byte reads of P)"),
            (lanes <= WARP and WARP % lanes == 0,
             f"block_k / keys ({lanes}) lanes share a row: it must divide {WARP}, one warp"),
            (d % (4 * lanes) == 0,
             f"d ({d}) must be a multiple of 4 x {lanes}: each of a row's {lanes} lanes keeps whole float4s of it"),
            (self.threads() % WARP == 0 and self.threads() <= 1024,
             f"the block has {self.threads()} threads: it must be whole warps, at most 1024"),
            (4 * self.shared_floats(d) <= SHARED_BYTES,
             f"the tiles need {4 * self.shared_floats(d):,} bytes of shared memory, over the "
             f"{SHARED_BYTES:,} a block holds without opting in: use smaller blocks for d = {d}"),
        ]
        for holds, message in rules:
            if not holds:
                raise ValueError(message)


TILED_CONFIG = r"numba tiled q(\d+)/k(\d+)/r(\d+)x(\d+)"  # how the attention record names the tiled kernel


@lru_cache(maxsize=1)
def measured_tiled_config() -> TiledConfig | None:
    """The tiled shape the committed H200 record timed fastest at its longest sequence; None until it has one."""
    shape = fastest_at_longest(TILED_CONFIG)
    return TiledConfig(*shape) if shape else None


FALLBACK_SHAPES = ((64, 32, 4, 4), (32, 16, 4, 2), (64, 32, 4, 8), (64, 16, 4, 8), (64, 16, 4, 4), (64, 8, 4, 4),
                   (32, 8, 1, 8))
"""Shapes tried in order where no measured one fits: the last fits every head size that is a multiple of 4."""


def default_tiled_config(d: int) -> TiledConfig:
    """The measured best (:func:`measured_tiled_config`) where it fits ``d``; else the first of
    :data:`FALLBACK_SHAPES` that fits ``d``'s tiles in 48 KB with whole warps."""
    measured = measured_tiled_config()
    if measured is not None and not is_simulator() and fits(measured, d):
        return measured
    candidates = [TiledConfig(*shape) for shape in FALLBACK_SHAPES]
    return next((c for c in candidates if fits(c, d)), candidates[-1])  # the last: its check names the rule


def tiling(head_dim, block_q, block_k, rows, keys):
    """The tiled kernel's compile-time numbers: D, BQ, BK, TM, TN, CG (lanes a row), RG (row groups), TD (output
    columns a thread) and THREADS."""
    lanes = block_k // keys
    return (head_dim, block_q, block_k, rows, keys, lanes, block_q // rows, head_dim // lanes,
            (block_q // rows) * lanes)


def make_stage(head_dim, threads):
    """A device function copying rows of one head into a shared tile, 16 bytes a load; zeros past the end."""
    D4, QS4, THREADS = head_dim // 4, (head_dim + 4) // 4, threads  # row strides in float4s (QS4: padded by 4)

    @cuda.jit(device=True, inline="always")
    def stage(src, tile, row0, rows_here, length, scale, padded):
        stride = QS4 if padded else D4
        for e in range(cuda.threadIdx.x, rows_here * D4, THREADS):
            r, c4 = e // D4, e % D4
            x0 = x1 = x2 = x3 = float32(0)
            if row0 + r < length:
                x0, x1, x2, x3 = load4(src, (row0 + r) * D4 + c4)
            store4(tile, r * stride + c4, x0 * scale, x1 * scale, x2 * scale, x3 * scale)

    return stage


def make_scores(shape):
    """s[r, n] = Q[row r] . K[key n] for a thread's micro-tile, four head columns at a time from registers."""
    D, _, _, TM, TN, CG, RG, _, _ = shape
    D4, QS4, TM4, TN4 = D // 4, (D + 4) // 4, 4 * TM, 4 * TN

    @cuda.jit(device=True, inline="always")
    def scores(q_s, k_s, s, ty, tx):
        qf = cuda.local.array(TM4, float32)
        kf = cuda.local.array(TN4, float32)
        for i in range(TM * TN):
            s[i] = float32(0)
        for c4 in range(D4):
            for r in range(TM):
                qf[4 * r], qf[4 * r + 1], qf[4 * r + 2], qf[4 * r + 3] = load4(q_s, (ty + RG * r) * QS4 + c4)
            for n in range(TN):
                kf[4 * n], kf[4 * n + 1], kf[4 * n + 2], kf[4 * n + 3] = load4(k_s, (tx + CG * n) * QS4 + c4)
            for r in range(TM):
                for n in range(TN):
                    a = s[r * TN + n]
                    for i in range(4):
                        a += qf[4 * r + i] * kf[4 * n + i]
                    s[r * TN + n] = a

    return scores


def make_softmax_step(shape, causal, row_max):
    """Mask, update each of a thread's rows' running max and sum, rescale its outputs, write its part of P."""
    _, _, BK, TM, TN, CG, RG, TD, _ = shape
    NEG = float32(-math.inf)

    @cuda.jit(device=True, inline="always")
    def softmax_step(s, m, total, acc, p_s, scratch, ty, tx, q0, start, length, masked):
        for r in range(TM):
            row = q0 + ty + RG * r
            top = NEG
            for n in range(TN):
                key = start + tx + CG * n
                if masked and (key >= length or (causal and key > row)):
                    s[r * TN + n] = NEG
                top = max(top, s[r * TN + n])
            m_new = max(m[r], row_max(top, scratch))
            correction = math.exp2(m[r] - m_new)  # 0 on the first tile, where m is -inf
            m[r] = m_new
            part = float32(0)
            for n in range(TN):
                p = math.exp2(s[r * TN + n] - m_new)  # 0 for a masked key
                part += p
                p_s[(ty + RG * r) * (BK + 4) + tx + CG * n] = p
            total[r] = total[r] * correction + part  # this lane's keys only: summed over the row at the end
            for e in range(TD):
                acc[r * TD + e] *= correction

    return softmax_step


def make_weighted_sum(shape):
    """acc[r, :] += P[row r, j] V[j, :] over a tile's keys, four keys at a time."""
    D, _, BK, TM, _, CG, RG, TD, _ = shape
    D4, PS4, TM4 = D // 4, (BK + 4) // 4, 4 * TM

    @cuda.jit(device=True, inline="always")
    def weighted_sum(p_s, v_s, acc, ty, tx):
        pf = cuda.local.array(TM4, float32)
        for j4 in range(BK // 4):
            for r in range(TM):
                pf[4 * r], pf[4 * r + 1], pf[4 * r + 2], pf[4 * r + 3] = load4(p_s, (ty + RG * r) * PS4 + j4)
            for jj in range(4):
                for ch in range(TD // 4):
                    v0, v1, v2, v3 = load4(v_s, (4 * j4 + jj) * D4 + tx + CG * ch)
                    for r in range(TM):
                        p = pf[4 * r + jj]
                        base = r * TD + 4 * ch
                        acc[base] += p * v0
                        acc[base + 1] += p * v1
                        acc[base + 2] += p * v2
                        acc[base + 3] += p * v3

    return weighted_sum


def make_tiled_attention_kernel(head_dim, block_q, block_k, rows, keys, causal):
    """The register-tiled fused kernel for one head size, block shape and masking."""
    shape = tiling(head_dim, block_q, block_k, rows, keys)
    D, BQ, BK, TM, TN, CG, RG, TD, THREADS = shape  # compile-time constants
    D4, NEG, SCRATCH = D // 4, float32(-math.inf), THREADS if is_simulator() else 1
    Q_SIZE, K_SIZE, V_SIZE, P_SIZE = TiledConfig(block_q, block_k, rows, keys).tile_floats(D)  # the check's sizes
    S_SIZE, ACC_SIZE = TM * TN, TM * TD
    stage, (row_max, row_sum) = make_stage(D, THREADS), make_row_reductions(CG)
    scores, weighted_sum = make_scores(shape), make_weighted_sum(shape)
    softmax_step = make_softmax_step(shape, causal, row_max)

    @cuda.jit
    def tiled_attention_kernel(q, k, v, out, length, scale):
        # q, k, v, out: one head after another, flattened: (heads * length * D,), 16-byte aligned
        ty, tx = cuda.threadIdx.x // CG, cuda.threadIdx.x % CG
        qb = cuda.gridDim.x - 1 - cuda.blockIdx.x if causal else cuda.blockIdx.x  # causal: longest blocks first
        q0, head = qb * BQ, cuda.blockIdx.y * length  # first query row; first row of this head
        q_s = cuda.shared.array(Q_SIZE, float32, alignment=SHARED_ALIGN)
        k_s = cuda.shared.array(K_SIZE, float32, alignment=SHARED_ALIGN)
        v_s = cuda.shared.array(V_SIZE, float32, alignment=SHARED_ALIGN)
        p_s = cuda.shared.array(P_SIZE, float32, alignment=SHARED_ALIGN)
        scratch = cuda.shared.array(SCRATCH, float32)  # the simulator's stand-in for warp shuffles
        s = cuda.local.array(S_SIZE, float32)
        acc = cuda.local.array(ACC_SIZE, float32)
        m = cuda.local.array(TM, float32)
        total = cuda.local.array(TM, float32)
        for r in range(TM):
            m[r], total[r] = NEG, float32(0)
        for e in range(TM * TD):
            acc[e] = float32(0)
        stage(q, q_s, head + q0, BQ, head + length, scale, True)
        keys = min(length, q0 + BQ) if causal else length
        for start in range(0, keys, BK):
            stage(k, k_s, head + start, BK, head + length, float32(1), True)
            stage(v, v_s, head + start, BK, head + length, float32(1), False)
            cuda.syncthreads()
            scores(q_s, k_s, s, ty, tx)
            masked = start + BK > length or (causal and start + BK - 1 > q0)  # the same for the whole block
            softmax_step(s, m, total, acc, p_s, scratch, ty, tx, q0, start, length, masked)
            cuda.syncthreads()
            weighted_sum(p_s, v_s, acc, ty, tx)
            cuda.syncthreads()  # before the next tiles overwrite K, V and P
        for r in range(TM):
            inverse = float32(1) / row_sum(total[r], scratch)
            row = q0 + ty + RG * r
            if row < length:
                for ch in range(TD // 4):
                    e = r * TD + 4 * ch
                    store4(out, (head + row) * D4 + tx + CG * ch,
                           acc[e] * inverse, acc[e + 1] * inverse, acc[e + 2] * inverse, acc[e + 3] * inverse)

    return tiled_attention_kernel


def checked_kernel(make: Callable[[int, Any, bool], Any], head_dim: int, config: Any, causal: bool) -> Any:
    """``make(head_dim, config, causal)``, compiled once for each, the shape checked for this head size first
    (once: a timed loop of launches pays nothing for it; a shape that fails is checked, and refused, each time)."""
    return _compiled(make, require_whole("head_dim", head_dim), config, require_flag("causal", causal))


@lru_cache(maxsize=None)
def _compiled(make: Callable[[int, Any, bool], Any], d: int, config: Any, causal: bool) -> Any:
    config.check(d)
    return make(d, config, causal)


def tiled_kernel(head_dim: int, config: TiledConfig, causal: bool) -> Any:
    """The tiled kernel for this head size, shape and masking (compiled once each)."""
    return checked_kernel(_make_tiled, head_dim, config, causal)


def _make_tiled(d: int, c: TiledConfig, causal: bool) -> Any:
    return make_tiled_attention_kernel(d, c.block_q, c.block_k, c.rows, c.keys, causal)


def run_tiled(q: Any, k: Any, v: Any, out: Any, causal: bool = False, config: TiledConfig | None = None) -> None:
    """One launch of the register-tiled kernel; allocates nothing.  The arrays must be contiguous and
    16-byte aligned (fresh device arrays are)."""
    heads, length, d = require_flat_qkv(q, k, v, out, "the tiled kernel")
    config = checked_config(config or default_tiled_config(d), TiledConfig)
    kernel = tiled_kernel(d, config, require_flag("causal", causal))
    if heads and length:
        launch_flat(kernel, ((length + config.block_q - 1) // config.block_q, heads), config.threads(), q, k, v, out)


def require_flat_qkv(q: Any, k: Any, v: Any, out: Any, what: str, dtype: Any = np.float32) -> tuple[int, int, int]:
    """(heads, L, last axis) of four arrays of ``dtype`` and one shape that ``what`` can read as flat 16-byte runs."""
    shape = _require_qkv(q, k, v, out, dtype)
    require_flat_and_aligned({"q": q, "k": k, "v": v, "out": out}, what)
    return shape


def checked_config(config: Any, kind: type) -> Any:
    if not isinstance(config, kind):
        raise TypeError(f"`config` must be a {kind.__name__}, got {type(config).__name__}")
    return config


def launch_flat(kernel: Any, blocks: tuple[int, int], threads: int, q: Any, k: Any, v: Any, out: Any,
                d: int | None = None) -> None:
    """Launch a flat-array attention kernel: the four arrays one head after another, and the scale in base 2 for
    head size ``d`` (default: the arrays' last axis; bf16 pairs hold two columns an element)."""
    heads, length, last = q.shape
    q, k, v, out = (a.reshape(heads * length * last) for a in (q, k, v, out))  # one head after another
    kernel[blocks, threads](q, k, v, out, length, float32(math.log2(math.e) / math.sqrt(d or last)))


def flat_signature(element: Any) -> tuple[Any, ...]:
    """The argument types :func:`launch_flat` passes a kernel: four flat arrays of ``element``, the length and
    the scale."""
    array = types.Array(element, 1, "C")
    return (array, array, array, array, types.int64, types.float32)


def count_tiled(heads: int = 1, length: int = 40, d: int = 16, causal: bool = False,
                shape: tuple[int, int, int, int] = (32, 16, 2, 4)) -> list[Ledger]:
    """The tiled kernel once on random inputs, in a ledger (for :meth:`Ledger.counted_in_simulator`)."""
    q, k, v, out = random_qkv(heads, length, d)
    with Ledger(f"tiled causal={causal}") as ledger:
        run_tiled(q, k, v, out, causal, TiledConfig(*shape))
    return [ledger]


def tiled_traffic(heads: int, length: int, d: int, causal: bool, config: TiledConfig) -> dict[str, int]:
    """Bytes per array as the ledger counts them: Q and O once; K and V once for each block of query
    rows, up to the block's last key (causal: its last row) or the end of the sequence."""
    read = 0
    for q0 in range(0, length, config.block_q):
        keys = min(length, q0 + config.block_q) if causal else length
        read += min(length, math.ceil(keys / config.block_k) * config.block_k)
    return {"q": 4 * heads * length * d, "k": 4 * heads * read * d, "v": 4 * heads * read * d,
            "out": 4 * heads * length * d}


def compile_request(request: dict[str, Any]) -> dict[str, str]:
    """PTX of the tiled kernel for each ``[d, causal, block_q, block_k, rows, keys]`` in ``request["shapes"]``
    (run with the real compiler by ``helpers.counting.other_backend``; no GPU needed)."""
    return compile_shapes(request, lambda d, causal, *shape: make_tiled_attention_kernel(d, *shape, bool(causal)),
                          flat_signature(float32))
