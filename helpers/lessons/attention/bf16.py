"""Fused attention on bf16 tensor cores, the precision FlashAttention runs in: ``mma.sync`` m16n8k16.

bf16 keeps float32's exponent and 7 mantissa bits, so two of them fill one 32-bit register:
Q, K, V and O travel as pairs of bf16 (``uint32`` words, the even column in the low half), half
the bytes of float32.  One ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` multiplies a
16 x 16 bf16 matrix A by a 16 x 8 one B and adds a float32 16 x 8 C.  With ``g = lane // 4`` and
``t = lane % 4``, each register holding columns (of A) or rows (of B) ``2t`` and ``2t + 1``:

==========  =========================================================================
A (16 x 16) ``a0``: row g, columns 2t, 2t+1; ``a1``: row g + 8; ``a2``: row g, columns 2t+8, 2t+9; ``a3``: row g + 8
B (16 x 8)  ``b0``: rows 2t, 2t+1 of column g; ``b1``: rows 2t+8, 2t+9
C, D        as for TF32 (:mod:`.tensor_cores`): ``c0, c1`` row g, columns 2t, 2t+1; ``c2, c3`` row g + 8
==========  =========================================================================

The kernel follows :mod:`.tensor_cores`: each warp owns 16 query rows, S and P stay in its
fragments, and the keys and head columns are taken in an order that makes every fragment one
8-byte shared read and P's accumulator V's A fragment.  Scores are float32 (scaled after the
product, in base 2); P is rounded to bf16 for the second product; the output is rounded once.
In the simulator the instruction is emulated lane by lane from the table above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, float32, uint32

from helpers.backend import is_simulator
from helpers.counting.ptx import compile_shapes
from helpers.validate import require_whole

from .tensor_cores import keep, make_fragment_kernel, make_fragment_softmax
from .tiled import SHARED_BYTES, checked_config, checked_kernel, flat_signature, launch_flat, require_flat_qkv

if is_simulator():
    from .tensor_cores import emulate_mma

    def _bf16_bits(x):
        """float32 ``x`` rounded to bf16 (to nearest, ties to even), as 16 bits."""
        bits = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF

    @cuda.jit(device=True)  # a device function, so that the simulator gives it its thread's `cuda`
    def pack_bf16(low, high):  # type: ignore[no-redef]
        """Two float32 rounded to bf16, in one word: ``cvt.rn.bf16x2.f32``."""
        return np.uint32(_bf16_bits(low) | (_bf16_bits(high) << 16))

    @cuda.jit(device=True)
    def load2(array, j):  # type: ignore[no-redef]
        """Elements 2j and 2j + 1 (the simulator's stand-in for one 8-byte load)."""
        return array[2 * j], array[2 * j + 1]

    @cuda.jit(device=True)
    def mma_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):  # type: ignore[no-redef]
        """The simulator's stand-in for one warp's m16n8k16 ``mma.sync``: A[row, k] is half k % 2 of lane
        4 (row % 8) + (k % 8) // 2's register (row >= 8) + 2 (k >= 8); B[k, col] half k % 2 of lane
        4 col + (k % 8) // 2's b0 or b1."""
        return emulate_mma((a0, a1, a2, a3, b0, b1), (c0, c1, c2, c3),
                           lambda row, k: (4 * (row % 8) + (k % 8) // 2, (row >= 8) + 2 * (k >= 8), k % 2),
                           lambda k, col: (4 * col + (k % 8) // 2, 4 + (k >= 8), k % 2), 16)

else:
    from llvmlite import ir
    from numba.core import types
    from numba.cuda.extending import intrinsic

    from .tensor_cores import make_mma

    @intrinsic
    def pack_bf16(typingctx: Any, low: Any, high: Any) -> Any:
        """Two float32 rounded to bf16, in one word (``low`` in the low half): ``cvt.rn.bf16x2.f32``."""

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            asm = ir.InlineAsm(ir.FunctionType(ir.IntType(32), [ir.FloatType()] * 2), "cvt.rn.bf16x2.f32 $0, $1, $2;",
                               "=r,f,f")
            return builder.call(asm, [args[1], args[0]])  # the instruction's first source goes to the high half

        return types.uint32(types.float32, types.float32), codegen

    @intrinsic
    def load2(typingctx: Any, array: Any, j: Any) -> Any:
        """Elements 2j and 2j + 1 of ``array`` in one 8-byte load."""
        result = types.UniTuple(array.dtype, 2)

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            vector = ir.VectorType(context.get_value_type(sig.args[0].dtype), 2)
            index = context.cast(builder, args[1], sig.args[1], types.intp)
            pair = builder.load(builder.gep(builder.bitcast(data, vector.as_pointer()), [index]), align=8)
            parts = [builder.extract_element(pair, ir.Constant(ir.IntType(32), k)) for k in range(2)]
            return context.make_tuple(builder, result, parts)

        return result(array, j), codegen

    mma_bf16 = make_mma("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", types.uint32)
    """D = A B + C for one warp, bf16 pairs in: ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``."""


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (to nearest, ties to even), two to a ``uint32`` word: last axis halved."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    return rounded.astype(np.uint16).view(np.uint32)


def from_bf16(words: np.ndarray) -> np.ndarray:
    """The float32 values of bf16 pairs (:func:`to_bf16`'s layout): last axis doubled."""
    return (np.ascontiguousarray(words, dtype=np.uint32).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(
        np.float32)


@dataclass(frozen=True)
class Bf16Config:
    """``warps`` warps of 16 query rows each; key tiles of ``block_k``."""

    warps: int = 4
    block_k: int = 64

    def __post_init__(self) -> None:
        require_whole("warps", self.warps, high=32)
        require_whole("block_k", self.block_k, high=1024)

    def tile_words(self, d: int) -> tuple[int, int]:
        """The 32-bit words of each shared tile for head size ``d``, as the kernel declares them: K (rows padded
        by 2 words) and V transposed (rows padded by 8 words)."""
        return self.block_k * (d // 2 + 2), d * (self.block_k // 2 + 8)

    def shared_words(self, d: int) -> int:
        """The words of shared memory the tiles take: :meth:`tile_words` summed."""
        return sum(self.tile_words(d))

    def check(self, d: int) -> None:
        if d % 16 or self.block_k % 16:
            raise ValueError(f"d ({d}) and block_k ({self.block_k}) must be multiples of 16 (one m16n8k16 step)")
        if 4 * self.shared_words(d) > SHARED_BYTES:
            raise ValueError(f"the K and V tiles need {4 * self.shared_words(d):,} bytes of shared memory, over the "
                             f"{SHARED_BYTES:,} a block holds without opting in: use a smaller block_k")


def default_bf16_config(d: int) -> Bf16Config:
    """Four warps and 64-key tiles, 32 for d = 128 (not yet chosen by measurement); in the simulator, which
    emulates every mma.sync, one warp and 16-key tiles."""
    return Bf16Config(1, 16) if is_simulator() else Bf16Config(4, 64 if d <= 64 else 32)


def make_bf16_stage(head_dim, block_k, threads):
    """Stage a tile of K (as it is) and of V (transposed, two keys to a word); zeros past the end."""
    D2, BK, THREADS = head_dim // 2, block_k, threads  # D2: words per row
    KS, VS = D2 + 2, BK // 2 + 8  # padded row strides of the K and transposed V tiles, in words

    @cuda.jit(device=True, inline="always")
    def stage(k, v, k_s, vt_s, row0, end):
        """K's rows as they are; V transposed, two keys to a word; zeros past ``end``."""
        for e in range(cuda.threadIdx.x, BK * D2, THREADS):
            r, w = e // D2, e % D2
            k_s[r * KS + w] = k[(row0 + r) * D2 + w] if row0 + r < end else uint32(0)
        for e in range(cuda.threadIdx.x, (BK // 2) * D2, THREADS):
            j, w = e % (BK // 2), e // (BK // 2)  # neighbouring lanes: neighbouring key pairs, no store conflicts
            low = v[(row0 + 2 * j) * D2 + w] if row0 + 2 * j < end else uint32(0)
            high = v[(row0 + 2 * j + 1) * D2 + w] if row0 + 2 * j + 1 < end else uint32(0)
            vt_s[(2 * w) * VS + j] = (low & uint32(0xFFFF)) | (high << uint32(16))
            vt_s[(2 * w + 1) * VS + j] = (low >> uint32(16)) | (high & uint32(0xFFFF0000))

    return stage


def make_bf16_products(head_dim, block_k):
    """S = Q K^T (scaled) and O += P V for one warp's 16 rows, every fragment one 8-byte shared read."""
    D2, KS, VS = head_dim // 2, head_dim // 2 + 2, block_k // 2 + 8
    NT, DT, KS16, S_SIZE = block_k // 8, head_dim // 8, head_dim // 16, 4 * (block_k // 8)

    @cuda.jit(device=True, inline="always")
    def scores(qf, k_s, s, g, t, scale):
        """S = Q K^T, scaled: key ``16 (n // 2) + 4 (j // 2) + 2 (n % 2) + j % 2`` is column j of n-tile n, and
        head columns ``16 q + 4 t .. + 3`` are lane t's in k-step q: one 8-byte read of K per fragment."""
        for i in range(S_SIZE):
            s[i] = float32(0)
        for q in range(KS16):
            for n in range(NT):
                key = 16 * (n // 2) + 4 * (g // 2) + 2 * (n % 2) + g % 2
                b0, b1 = load2(k_s, (key * KS + 8 * q + 2 * t) // 2)
                s[4 * n], s[4 * n + 1], s[4 * n + 2], s[4 * n + 3] = mma_bf16(
                    qf[4 * q], qf[4 * q + 1], qf[4 * q + 2], qf[4 * q + 3], b0, b1,
                    s[4 * n], s[4 * n + 1], s[4 * n + 2], s[4 * n + 3])
        for i in range(S_SIZE):
            s[i] *= scale

    @cuda.jit(device=True, inline="always")
    def weighted_sum(s, vt_s, o, g, t):
        """O += P V: P's accumulators of n-tiles 2p and 2p + 1, rounded in pairs, are the A fragment of k-step p;
        lane t's keys ``16 p + 4 t .. + 3`` are one 8-byte read of the transposed V."""
        for p in range(NT // 2):
            a, b = 8 * p, 8 * p + 4
            p0, p1 = pack_bf16(s[a], s[a + 1]), pack_bf16(s[a + 2], s[a + 3])
            p2, p3 = pack_bf16(s[b], s[b + 1]), pack_bf16(s[b + 2], s[b + 3])
            for n in range(DT):
                b0, b1 = load2(vt_s, ((8 * n + g) * VS + 8 * p + 2 * t) // 2)
                o[4 * n], o[4 * n + 1], o[4 * n + 2], o[4 * n + 3] = mma_bf16(
                    p0, p1, p2, p3, b0, b1, o[4 * n], o[4 * n + 1], o[4 * n + 2], o[4 * n + 3])

    return scores, weighted_sum


def make_bf16_rows(head_dim):
    """Load the lane's two rows of Q as A fragments; store its two columns of an output row as a bf16 pair."""
    D2, KS16, DT = head_dim // 2, head_dim // 16, head_dim // 8

    @cuda.jit(device=True, inline="always")
    def load_q(q, qf, rows, length, t, scale):
        """Words ``8 q + 2 t`` and ``+ 1`` (head columns ``16 q + 4 t .. + 3``) of the lane's two rows."""
        for q_step in range(KS16):
            for h in range(2):
                w0 = w1 = uint32(0)
                if rows + 8 * h < length:
                    w0, w1 = load2(q, ((rows + 8 * h) * D2 + 8 * q_step + 2 * t) // 2)
                qf[4 * q_step + h], qf[4 * q_step + 2 + h] = w0, w1

    @cuda.jit(device=True, inline="always")
    def store_row(out, o, whole, h, row, t):
        """The lane's two columns of each n-tile of one output row, divided by the row's sum, as one bf16 pair."""
        for n in range(DT):
            out[row * D2 + 4 * n + t] = pack_bf16(o[4 * n + 2 * h] / whole, o[4 * n + 2 * h + 1] / whole)

    return load_q, store_row


def make_bf16_attention_kernel(head_dim, warps, block_k, causal):
    """Fused attention on bf16 tensor cores: each warp owns 16 query rows; S and P stay in its fragments."""
    D, BK, NT, DT = head_dim, block_k, block_k // 8, head_dim // 8
    k_size, v_size = Bf16Config(warps, block_k).tile_words(D)  # the sizes its check adds up
    sizes = (warps, BK, k_size, v_size, 4 * (D // 16), 4 * NT, 4 * DT)  # K, V, Q, S, O
    scores, weighted_sum = make_bf16_products(D, BK)
    load_q, store_row = make_bf16_rows(D)
    parts = (load_q, make_bf16_stage(D, BK, 32 * warps), scores,
             make_fragment_softmax(NT, DT, causal, keep), weighted_sum, store_row)  # P rounded as it is packed
    return make_fragment_kernel(parts, sizes, uint32, causal)


def bf16_kernel(head_dim: int, config: Bf16Config, causal: bool) -> Any:
    """The kernel for this head size, shape and masking (compiled once each)."""
    return checked_kernel(_make, head_dim, config, causal)


def _make(d: int, c: Bf16Config, causal: bool) -> Any:
    return make_bf16_attention_kernel(d, c.warps, c.block_k, causal)


def run_bf16(q: Any, k: Any, v: Any, out: Any, causal: bool = False, config: Bf16Config | None = None) -> None:
    """One launch on bf16 tensor cores; allocates nothing.  Q, K, V and the output are bf16 pairs
    (:func:`to_bf16`): ``uint32`` device arrays of shape (heads, L, d // 2), contiguous and 16-byte aligned."""
    heads, length, words = require_flat_qkv(q, k, v, out, "the bf16 kernel", np.uint32)
    config = checked_config(config or default_bf16_config(2 * words), Bf16Config)
    kernel = bf16_kernel(2 * words, config, causal)
    if heads and length:
        rows = 16 * config.warps
        launch_flat(kernel, ((length + rows - 1) // rows, heads), 32 * config.warps, q, k, v, out, 2 * words)


def compile_request(request: dict[str, Any]) -> dict[str, str]:
    """PTX of the kernel for each ``[d, causal, warps, block_k]`` in ``request["shapes"]`` (run with the real
    compiler by ``helpers.counting.other_backend``; no GPU needed)."""
    return compile_shapes(request, lambda d, causal, warps, block_k: make_bf16_attention_kernel(
        d, warps, block_k, bool(causal)), flat_signature(uint32))
