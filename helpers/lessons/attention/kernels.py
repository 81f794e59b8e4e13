"""Attention ``O = softmax(Q K^T / sqrt(d)) V`` per head, float32, as notebook 12 writes it.

Arrays are ``(heads, L, d)``: batch and heads flattened into one axis, each head
independent.

* **Unfused**: :data:`scores_kernel` writes the L x L scores ``S``, the softmax of
  :mod:`helpers.lessons.softmax.kernels` writes ``P`` (another L x L array), :data:`weighted_sum_kernel`
  computes ``P V``.  Two L x L arrays per head go to memory and come back.
* **Fused** (:func:`make_flash_attention_kernel`): one thread per query row keeps its
  row of Q and its output row in registers; tiles of K and V are staged in shared
  memory (:func:`make_tile_stager`); an online softmax runs over the keys, so no L x L
  array ever exists.

Notebook 12's cells are the kernels' source, copied here between the export markers
by ``scripts/export_kernels.py``.  Plain FP32 arithmetic throughout: no tensor cores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numba import cuda, float32

from helpers.backend import is_simulator
from helpers.checks import poisoned
from helpers.ledger import Ledger
from helpers.lessons.softmax.kernels import default_threads, online_softmax_kernel, rows_kernel
from helpers.validate import check_no_aliasing, require_array, require_flag, require_whole

from .record import fastest_at_longest

TILE = 16  # the unfused kernels' square tiles
SHARED_ALIGN = None if is_simulator() else 16  # 16-byte aligned tiles: four floats per shared load
PADDED = TILE + 1  # a tile row one longer than the tile: no shared-memory bank conflicts


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False,
              rows: np.ndarray | None = None) -> np.ndarray:
    """Attention in float64 (NumPy), head by head, for the query rows ``rows`` of every head (an index array;
    default all): ``reference(q, k, v, causal, rows)`` is ``reference(q, k, v, causal)[:, rows]``, its scores
    only len(rows) x L a head."""
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    picked = np.arange(q64.shape[1]) if rows is None else np.asarray(rows)
    s = (q64 if rows is None else q64[:, picked]) @ k64.transpose(0, 2, 1) / math.sqrt(q64.shape[-1])
    if causal:  # key j is seen by query row i where j <= i
        s = np.where(np.arange(s.shape[-1])[None, :] <= picked[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v64


def _require_qkv(q: Any, k: Any, v: Any, out: Any, dtype: Any = np.float32) -> tuple[int, int, int]:
    """(heads, L, last axis) of four device arrays of ``dtype`` and one shape; ``out`` may be ``q``, never ``k`` or
    ``v``."""
    shapes = {name: tuple(getattr(a, "shape", ())) for name, a in (("q", q), ("k", k), ("v", v), ("out", out))}
    for name, a in (("q", q), ("k", k), ("v", v), ("out", out)):
        if len(shapes[name]) != 3:
            raise ValueError(f"`{name}` must be (heads, L, d), got shape {shapes[name]}")
        require_array(name, a, dtype=dtype)
    if len(set(shapes.values())) != 1:
        raise ValueError(f"q, k, v and out must have one shape, got {shapes}")
    heads, length, d = shapes["q"]
    if d < 1:
        raise ValueError(f"the head size d must be at least 1, got shape {shapes['q']}")
    # Later blocks read tiles of K and V that earlier blocks would already have overwritten;
    # each thread reads its own row of Q before it writes that row of the output.
    check_no_aliasing({"k": k, "v": v}, {"out": out})
    check_no_aliasing({"q": q}, {"out": out}, in_place=True)
    return heads, length, d


# --- unfused: S and P go through memory --------------------------------------------


# >>> exported from notebooks/12_attention_without_the_score_matrix.ipynb (the cell defining scores_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def scores_kernel(q, k, s, scale, causal):
    bh = cuda.blockIdx.z
    i = cuda.blockIdx.y * TILE + cuda.threadIdx.y  # query row
    j = cuda.blockIdx.x * TILE + cuda.threadIdx.x  # key row
    q_tile = cuda.shared.array((TILE, PADDED), float32)
    k_tile = cuda.shared.array((TILE, PADDED), float32)
    length, d = q.shape[1], q.shape[2]
    j_load = cuda.blockIdx.x * TILE + cuda.threadIdx.y
    acc = float32(0)
    for c0 in range(0, d, TILE):
        c = c0 + cuda.threadIdx.x
        q_tile[cuda.threadIdx.y, cuda.threadIdx.x] = q[bh, i, c] if i < length and c < d else float32(0)
        k_tile[cuda.threadIdx.y, cuda.threadIdx.x] = k[bh, j_load, c] if j_load < length and c < d else float32(0)
        cuda.syncthreads()
        for cc in range(TILE):
            acc += q_tile[cuda.threadIdx.y, cc] * k_tile[cuda.threadIdx.x, cc]
        cuda.syncthreads()
    if i < length and j < length:
        s[bh * length + i, j] = acc * scale if not causal or j <= i else float32(-math.inf)


@cuda.jit
def weighted_sum_kernel(p, v, out):
    bh = cuda.blockIdx.z
    i = cuda.blockIdx.y * TILE + cuda.threadIdx.y  # query row
    c = cuda.blockIdx.x * TILE + cuda.threadIdx.x  # output column
    p_tile = cuda.shared.array((TILE, PADDED), float32)
    v_tile = cuda.shared.array((TILE, PADDED), float32)
    length, d = v.shape[1], v.shape[2]
    acc = float32(0)
    for j0 in range(0, length, TILE):
        j = j0 + cuda.threadIdx.x
        p_tile[cuda.threadIdx.y, cuda.threadIdx.x] = p[bh * length + i, j] if i < length and j < length else float32(0)
        jv = j0 + cuda.threadIdx.y
        v_tile[cuda.threadIdx.y, cuda.threadIdx.x] = v[bh, jv, c] if jv < length and c < d else float32(0)
        cuda.syncthreads()
        for jj in range(TILE):
            acc += p_tile[cuda.threadIdx.y, jj] * v_tile[jj, cuda.threadIdx.x]
        cuda.syncthreads()
    if i < length and c < d:
        out[bh, i, c] = acc
# <<< end of the export from notebooks/12_attention_without_the_score_matrix.ipynb


def require_scratch(q: Any, k: Any, v: Any, s: Any, p: Any, out: Any) -> None:
    """``s`` and ``p`` are (heads x L) x L floating device matrices apart from Q, K, V and the output."""
    heads, length = q.shape[0], q.shape[1]
    for name, a in (("s", s), ("p", p)):
        require_array(name, a, ndim=2, floating=True)
    if tuple(s.shape) != (heads * length, length) or tuple(p.shape) != (heads * length, length):
        raise ValueError(f"`s` and `p` must be ({heads * length}, {length}), got {tuple(s.shape)} and {tuple(p.shape)}")
    check_no_aliasing({"q": q, "k": k, "v": v}, {"s": s, "p": p})
    check_no_aliasing({"s": s, "p": p}, {"out": out})


def unfused_buffers(heads: int, length: int) -> tuple[Any, Any]:
    """The two L x L arrays per head the unfused pipeline needs: scores and probabilities.

    Each is one (heads x L) x L matrix: row ``h * L + i`` holds query row i of head h,
    so the softmax kernels run over it unchanged.
    """
    heads, length = require_whole("heads", heads, low=0), require_whole("length", length, low=0)
    return (cuda.device_array((heads * length, length), np.float32),
            cuda.device_array((heads * length, length), np.float32))


def run_unfused(q: Any, k: Any, v: Any, s: Any, p: Any, out: Any, causal: bool = False) -> None:
    """Scores to ``s``, softmax to ``p``, then ``p @ v`` to ``out``: three kernels (none when there are no
    heads or no rows, L = 0: there is nothing to compute)."""
    heads, length, d = _require_qkv(q, k, v, out)
    causal = require_flag("causal", causal)
    require_scratch(q, k, v, s, p, out)
    if heads == 0 or length == 0:
        return  # a launch of 0 blocks would do nothing in the simulator, and a GPU refuses it
    tiles = (length + TILE - 1) // TILE
    scores_kernel[(tiles, tiles, heads), (TILE, TILE)](q, k, s, float32(1 / math.sqrt(d)), causal)
    unfused_softmax(s, p)
    weighted_sum_kernel[((d + TILE - 1) // TILE, tiles, heads), (TILE, TILE)](p, v, out)


def unfused_softmax(s: Any, p: Any) -> None:
    """The unfused pipelines' softmax of every row of ``s`` into ``p``: rows in registers, or online when too long."""
    rows, length = s.shape
    threads = default_threads(length)
    if length <= 64 * threads:
        rows_kernel(length, threads)[rows, threads](s, p)
    else:
        online_softmax_kernel[rows, threads](s, p)


# --- fused: FlashAttention-style ---------------------------------------------------


# >>> exported from notebooks/12_attention_without_the_score_matrix.ipynb (the cell defining make_tile_stager);
# >>> edit the notebook, then run python scripts/export_kernels.py
def make_tile_stager(head_dim, block_q, block_k, batch):
    """A device function that stages tiles of ``block_k`` rows of K and V in shared memory, coalesced."""
    D, BQ, BK, BATCH = head_dim, block_q, block_k, batch  # compile-time constants

    @cuda.jit(device=True, inline="always")
    def stage_tiles(k, v, k_tile, v_tile, bh, start, t):
        length = k.shape[1]
        k_part = cuda.local.array(BATCH, float32)
        v_part = cuda.local.array(BATCH, float32)
        for e0 in range(0, BK * D, BQ * BATCH):  # the block stages K and V tiles, coalesced,
            for u in range(BATCH):  # BATCH loads of each issued before any is needed
                r, c = (e0 + u * BQ + t) // D, (e0 + u * BQ + t) % D
                k_part[u] = k[bh, start + r, c] if start + r < length else float32(0)
                v_part[u] = v[bh, start + r, c] if start + r < length else float32(0)
            for u in range(BATCH):
                r, c = (e0 + u * BQ + t) // D, (e0 + u * BQ + t) % D
                k_tile[r, c] = k_part[u]
                v_tile[r, c] = v_part[u]

    return stage_tiles
# <<< end of the export from notebooks/12_attention_without_the_score_matrix.ipynb


@dataclass(frozen=True)
class FlashConfig:
    """Block shape of the fused kernel."""

    block_q: int = 64
    block_k: int = 64
    batch: int = 4  # tile loads each thread has in flight at once
    keys_per_step: int = 2  # keys scored together before one update of the running max

    def __post_init__(self) -> None:
        require_whole("block_q", self.block_q, high=1024)
        for name in ("block_k", "batch", "keys_per_step"):
            require_whole(name, getattr(self, name))


SIMULATOR_CONFIG = FlashConfig(16, 16, 4, 2)
"""16 query rows and 16-key tiles: small enough for the simulator, and the shape the ledger counts."""


FUSED_CONFIG = r"numba fused q(\d+)/k(\d+)/b(\d+)/s(\d+)"  # how the attention record names the fused kernel


@lru_cache(maxsize=1)
def measured_default_config() -> FlashConfig | None:
    """The block shape the committed H200 record timed fastest at its longest sequence; None without the record."""
    shape = fastest_at_longest(FUSED_CONFIG)
    return FlashConfig(*shape) if shape else None


def default_config(head_dim: int | None = None) -> FlashConfig:
    """16 query rows and 16-key tiles in the simulator; on a GPU the measured best
    (:func:`measured_default_config`) where it fits ``head_dim``, else 64 and 64."""
    if is_simulator():
        return SIMULATOR_CONFIG
    measured = measured_default_config()
    if measured is not None and (head_dim is None or fits(measured, head_dim)):
        return measured
    return FlashConfig()


def fits(config: FlashConfig, head_dim: int) -> bool:
    """Whether a tile of ``block_k`` keys x ``head_dim`` splits evenly into the block's batches of loads."""
    return (config.block_k * head_dim) % (config.block_q * config.batch) == 0


_flash: dict[tuple[int, int, int, int, int, bool], Any] = {}


def flash_kernel(head_dim: int, config: FlashConfig, causal: bool) -> Any:
    """The fused kernel for this head size, block shape and masking (compiled once each)."""
    head_dim, causal = require_whole("head_dim", head_dim), require_flag("causal", causal)
    if head_dim > 128 or head_dim % 4:
        raise ValueError(f"head size must be a multiple of 4 and at most 128 (a row is kept in registers), got {head_dim}")
    if not fits(config, head_dim):
        raise ValueError(f"a tile of {config.block_k} keys x {head_dim} must split evenly into batches of "
                         f"{config.batch} loads over {config.block_q} threads")
    if config.keys_per_step not in (1, 2, 4):
        raise ValueError(f"keys_per_step must be 1, 2 or 4, got {config.keys_per_step}")
    key = (head_dim, config.block_q, config.block_k, config.batch, config.keys_per_step, causal)
    if key not in _flash:
        _flash[key] = make_flash_attention_kernel(head_dim, config.block_q, config.block_k, causal, config.batch,
                                                  config.keys_per_step)
    return _flash[key]


def run_fused(q: Any, k: Any, v: Any, out: Any, causal: bool = False, config: FlashConfig | None = None) -> None:
    """One launch of the fused kernel; allocates nothing (and launches nothing when there are no heads or
    no rows, L = 0)."""
    heads, length, d = _require_qkv(q, k, v, out)
    causal = require_flag("causal", causal)
    config = config or default_config(d)
    if not isinstance(config, FlashConfig):
        raise TypeError(f"`config` must be a FlashConfig, got {type(config).__name__}")
    if heads == 0 or length == 0:
        return  # a launch of 0 blocks would do nothing in the simulator, and a GPU refuses it
    blocks = ((length + config.block_q - 1) // config.block_q, heads)
    flash_kernel(d, config, causal)[blocks, config.block_q](q, k, v, out, float32(1 / math.sqrt(d)))


def random_qkv(heads: int, length: int, d: int) -> tuple[Any, Any, Any, Any]:
    """Random Q, K and V of shape (heads, L, d) on the device, and a poisoned output of that shape."""
    rng = np.random.default_rng()
    q, k, v = (cuda.to_device(rng.standard_normal((heads, length, d)).astype(np.float32)) for _ in range(3))
    return q, k, v, poisoned(heads * length * d).reshape(heads, length, d)


def count_ledgers(heads: int = 1, length: int = 40, d: int = 8) -> list[Ledger]:
    """Both pipelines on random (heads, L, d) inputs, each in a ledger (fused with :data:`SIMULATOR_CONFIG`)."""
    q, k, v, out = random_qkv(heads, length, d)
    s, p = unfused_buffers(heads, length)
    with Ledger("unfused") as unfused:
        run_unfused(q, k, v, s, p, out)
    with Ledger("fused") as fused:
        run_fused(q, k, v, out, config=SIMULATOR_CONFIG)
    return [unfused, fused]


def attention_flops(heads: int, length: int, d: int, causal: bool) -> int:
    """Multiply-adds of ``Q K^T`` and ``P V``, two flops each: ``4 d`` per (query, key) pair computed.

    Causal attention computes only the pairs with key <= query: ``L (L + 1) / 2`` of ``L^2``.
    """
    pairs = length * (length + 1) // 2 if causal else length * length
    return 4 * d * heads * pairs


@dataclass
class Footprint:
    """Device memory one attention call needs, by pipeline, in bytes."""

    length: int
    inputs_and_output: int  # Q, K, V and O
    unfused_scratch: int  # S and P: 2 x heads x L x L floats
    fused_scratch: int  # nothing: tiles live in shared memory, rows in registers


def footprint(heads: int, length: int, d: int) -> Footprint:
    """The arrays each pipeline allocates (run_fused allocates none; run_unfused needs S and P)."""
    heads, length, d = (require_whole(n, x, low=0) for n, x in (("heads", heads), ("length", length), ("d", d)))
    return Footprint(length, 4 * heads * length * d * 4, 2 * heads * length * length * 4, 0)


@dataclass
class PredictedTraffic:
    """Bytes each pipeline moves per array, as the ledger counts them (distinct elements per thread)."""

    unfused: dict[str, int]
    fused: dict[str, int]

    @property
    def unfused_bytes(self) -> int:
        return sum(self.unfused.values())

    @property
    def fused_bytes(self) -> int:
        return sum(self.fused.values())


def predicted_traffic(heads: int, length: int, d: int, config: FlashConfig | None = None) -> PredictedTraffic:
    """The ledger's count for both pipelines (not causal), from the kernels' loops, at any size.

    Unfused: ``scores_kernel`` loads each element of Q once per column of 16 x 16 tiles and
    each element of K once per row of tiles, and writes S; the softmax reads S and writes P;
    ``weighted_sum_kernel`` loads P once per 16 output columns and V once per row of tiles.
    Fused: Q is read once, K and V once per block of query rows, O written once.
    """
    heads, length, d = (require_whole(n, x) for n, x in (("heads", heads), ("length", length), ("d", d)))
    config = config or default_config(d)
    f = 4  # bytes per float32
    tiles, col_tiles = math.ceil(length / TILE), math.ceil(d / TILE)
    row_blocks = math.ceil(length / config.block_q)
    vec, square = heads * length * d, heads * length * length
    unfused = {"q": f * tiles * vec, "k": f * tiles * vec, "s": f * 2 * square,
               "p": f * (1 + col_tiles) * square, "v": f * tiles * vec, "out": f * vec}
    fused = {"q": f * vec, "k": f * row_blocks * vec, "v": f * row_blocks * vec, "out": f * vec}
    return PredictedTraffic(unfused, fused)


# >>> exported from notebooks/12_attention_without_the_score_matrix.ipynb (the cell defining make_flash_attention_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
def make_flash_attention_kernel(head_dim, block_q, block_k, causal, batch=4, keys_per_step=2):
    """Fused attention for heads of ``head_dim``: ``block_q`` query rows per block, key tiles of ``block_k``."""
    D, BQ, BK, STEP = head_dim, block_q, block_k, keys_per_step  # compile-time constants
    stage_tiles = make_tile_stager(head_dim, block_q, block_k, batch)

    @cuda.jit
    def flash_attention_kernel(q, k, v, out, scale):
        bh = cuda.blockIdx.y
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * BQ + t  # this thread's query row
        length = q.shape[1]
        k_tile = cuda.shared.array((BK, D), float32, alignment=SHARED_ALIGN)
        v_tile = cuda.shared.array((BK, D), float32, alignment=SHARED_ALIGN)
        q_row = cuda.local.array(D, float32)  # registers
        acc = cuda.local.array(D, float32)  # the output row, unnormalised
        scores = cuda.local.array(STEP, float32)
        for c in range(D):
            q_row[c] = q[bh, i, c] * scale if i < length else float32(0)
            acc[c] = float32(0)
        m = float32(-math.inf)  # running max of this row's scores (float32: -math.inf alone is a float64)
        total = float32(0)  # running sum of exp(score - m)
        keys = min(length, (cuda.blockIdx.x + 1) * BQ) if causal else length
        for start in range(0, keys, BK):
            stage_tiles(k, v, k_tile, v_tile, bh, start, t)
            cuda.syncthreads()
            for j0 in range(0, min(BK, keys - start), STEP):
                m_step = m
                for u in range(STEP):  # STEP keys at once: their dot products overlap
                    j = min(j0 + u, BK - 1)  # a key past the tile's end is masked just below
                    s0 = s1 = s2 = s3 = float32(0)  # four partial sums: independent FMAs overlap
                    for c in range(0, D, 4):
                        s0 += q_row[c] * k_tile[j, c]
                        s1 += q_row[c + 1] * k_tile[j, c + 1]
                        s2 += q_row[c + 2] * k_tile[j, c + 2]
                        s3 += q_row[c + 3] * k_tile[j, c + 3]
                    key = start + j0 + u
                    live = key < keys and (not causal or key <= i)
                    scores[u] = (s0 + s1) + (s2 + s3) if live else float32(-math.inf)
                    m_step = max(m_step, scores[u])
                if m_step > m:  # a new max: rescale what has been summed so far
                    correction = math.exp(m - m_step)
                    total *= correction
                    for c in range(D):
                        acc[c] *= correction
                    m = m_step
                for u in range(STEP):
                    weight = math.exp(scores[u] - m)  # 0 for a masked key
                    total += weight
                    j = min(j0 + u, BK - 1)
                    for c in range(D):
                        acc[c] += weight * v_tile[j, c]
            cuda.syncthreads()
        if i < length:
            for c in range(D):
                out[bh, i, c] = acc[c] / total

    return flash_attention_kernel
# <<< end of the export from notebooks/12_attention_without_the_score_matrix.ipynb
