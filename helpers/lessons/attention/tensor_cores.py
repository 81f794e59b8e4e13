"""Tensor cores from Numba: one TF32 ``mma.sync``, from its fragments up, and fused attention on it.

numba-cuda has no tensor-core API, but an ``@intrinsic`` can emit one PTX instruction.
:func:`mma_tf32` is ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``: the 32 lanes
of a warp together multiply a 16 x 8 matrix A by an 8 x 8 matrix B and add a 16 x 8
matrix C, each lane holding a few elements of each (its *fragments*).  With
``g = lane // 4`` and ``t = lane % 4``:

==========  ==========================================================
A (16 x 8)  ``a0 = A[g, t]``, ``a1 = A[g + 8, t]``, ``a2 = A[g, t + 4]``, ``a3 = A[g + 8, t + 4]``
B (8 x 8)   ``b0 = B[t, g]``, ``b1 = B[t + 4, g]``
C, D        ``c0 = C[g, 2t]``, ``c1 = C[g, 2t + 1]``, ``c2 = C[g + 8, 2t]``, ``c3 = C[g + 8, 2t + 1]``
==========  ==========================================================

The inputs are TF32: a float32 with its mantissa rounded to 10 bits (:func:`tf32`, one
``cvt.rna.tf32.f32``).  The sum is float32.  Three products recover float32 accuracy
("3xTF32"): split ``x = big + small`` with ``big = tf32(x)`` and ``small = tf32(x - big)``;
then ``a b ~ big_a big_b + big_a small_b + small_a big_b``.

How the tensor core rounds its float32 sum is not documented; Fasi, Higham, Mikaitis and Pranesh (2021) found
earlier tensor cores truncating it (rounding toward zero).  The H200's does not round either:
``scripts/attention_rounding_probe.py`` (its output in ``results/h200/attention_rounding_probe.txt``) has one
mma.sync add 3 x 2^-25 to 1 and gets 1, where rounding to nearest gives 1 + 2^-23, and add -2^-26 to 1 and get 1,
where truncating the exact sum would give 1 - 2^-24: a product's bits below the sum's last bit are dropped as it is
aligned.  We think those losses, over the 3L/8 mma.sync sums into O (3xTF32), are what grows with L: 3.6e-5 at
L = 4096 in the 2026-12-06 record (errors vary between input draws; 2.2e-5 in the probe's).
``scripts/attention_rounding_replay.py`` replays this kernel's arithmetic in NumPy; with truncated sums it comes
within about 1.5 times of the H200's errors, with rounded sums 6 to 80 times below them.
``TensorCoreConfig(tile_sums=True)`` is the fix: each key tile's P V goes into fresh zero fragments, then O += tile
in ordinary (rounded) float32.  Measured at L = 4096, w8/k64: 1.8e-6, in 7.76 ms against 7.48 ms without.

In the CUDA simulator the instruction does not exist: :func:`mma_tf32` is emulated there,
lane by lane from the table above, so the simulator checks the kernels' indexing; only a
GPU runs the real instruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numba import cuda, float32

from helpers.backend import is_simulator
from helpers.counting.ptx import compile_shapes
from helpers.device import HOPPER_SM, resident_blocks_per_sm
from helpers.ledger import Ledger
from helpers.lessons.roofline.kernels import load4, store4
from helpers.lessons.softmax.kernels import fits, make_row_reductions
from helpers.validate import require_flag, require_whole

from .kernels import SHARED_ALIGN, random_qkv, require_scratch, unfused_softmax

from .record import fastest_at_longest
from .tiled import SHARED_BYTES, checked_config, checked_kernel, flat_signature, launch_flat, require_flat_qkv

if is_simulator():
    _posted: dict[tuple[int, ...], tuple[Any, ...]] = {}

    def tf32(x):  # type: ignore[no-redef]
        """``x`` rounded to TF32 (10 mantissa bits, ties away from zero), as ``cvt.rna.tf32.f32`` does."""
        bits = np.array([x], dtype=np.float32).view(np.uint32)
        return np.float32(((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)[0])

    def halves(word):
        """The two bf16 of a 32-bit word as float32: (low, high)."""
        w = np.uint32(word)
        pair = np.array([(w << np.uint32(16)) & np.uint32(0xFFFF0000), w & np.uint32(0xFFFF0000)], dtype=np.uint32)
        return tuple(float(x) for x in pair.view(np.float32))

    @cuda.jit(device=True)  # a device function, so that the simulator gives it its thread's `cuda`
    def emulate_mma(held, c, a_at, b_at, depth):
        """One warp's ``mma.sync``, emulated (the whole block must call it): every lane posts the registers it
        holds, then computes its four results of D = A B + C.  ``a_at(row, k)`` and ``b_at(k, col)`` say where an
        element is: (lane, register, half), half None for a whole float32 register, else 0 or 1 of two bf16."""
        block = (cuda.blockIdx.x, cuda.blockIdx.y, cuda.blockIdx.z)
        me = cuda.threadIdx.x
        cuda.syncthreads()
        _posted[(*block, me)] = tuple(held)
        cuda.syncthreads()
        lane = me % 32
        warp, g, t = me - lane, lane // 4, lane % 4

        def fetch(where):
            word = _posted[(*block, warp + where[0])][where[1]]
            return float(word) if where[2] is None else halves(word)[where[2]]

        out = [np.float32(float(v) + sum(fetch(a_at(row, kk)) * fetch(b_at(kk, col)) for kk in range(depth)))
               for v, row, col in ((c[0], g, 2 * t), (c[1], g, 2 * t + 1), (c[2], g + 8, 2 * t), (c[3], g + 8, 2 * t + 1))]
        cuda.syncthreads()
        return out[0], out[1], out[2], out[3]

    @cuda.jit(device=True)
    def mma_tf32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):  # type: ignore[no-redef]
        """The simulator's stand-in for one warp's m16n8k8 ``mma.sync``: A[row, k] is held by lane
        4 (row % 8) + k % 4 in register (row >= 8) + 2 (k >= 4); B[k, col] by lane 4 col + k % 4 in b0 or b1."""
        return emulate_mma((a0, a1, a2, a3, b0, b1), (c0, c1, c2, c3),
                           lambda row, k: (4 * (row % 8) + k % 4, (row >= 8) + 2 * (k >= 4), None),
                           lambda k, col: (4 * col + k % 4, 4 + (k >= 4), None), 8)

else:
    from llvmlite import ir
    from numba.core import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def tf32(typingctx: Any, x: Any) -> Any:
        """``x`` rounded to TF32: ``cvt.rna.tf32.f32``, its bits read back as a float32."""

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            rounded = builder.call(ir.InlineAsm(ir.FunctionType(ir.IntType(32), [ir.FloatType()]),
                                                "cvt.rna.tf32.f32 $0, $1;", "=r,f"), [args[0]])
            return builder.bitcast(rounded, ir.FloatType())

        return types.float32(types.float32), codegen

    def make_mma(instruction: str, operand: Any) -> Any:
        """An ``@intrinsic`` for one warp's ``instruction``, an ``mma.sync`` with float32 accumulators: six A and
        B registers of type ``operand`` (float32 holding TF32, or uint32 holding two bf16) and four C in, four D out."""

        @intrinsic
        def mma(typingctx: Any, a0: Any, a1: Any, a2: Any, a3: Any, b0: Any, b1: Any,
                c0: Any, c1: Any, c2: Any, c3: Any) -> Any:
            result = types.UniTuple(types.float32, 4)

            def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
                f32, i32 = ir.FloatType(), ir.IntType(32)
                bits = [builder.bitcast(x, i32) if operand == types.float32 else x for x in args[:6]]  # "r": bits
                asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([f32] * 4), [i32] * 6 + [f32] * 4),
                                   f"{instruction} {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, {{$8, $9}}, "
                                   "{$10, $11, $12, $13};", "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f")
                d = builder.call(asm, bits + list(args[6:]))
                return context.make_tuple(builder, result, [builder.extract_value(d, i) for i in range(4)])

            return result(*([operand] * 6), *([types.float32] * 4)), codegen

        return mma

    mma_tf32 = make_mma("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", types.float32)
    """D = A B + C for one warp, TF32 inputs: ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``."""


@dataclass(frozen=True)
class TensorCoreConfig:
    """``warps`` warps of 16 query rows each; key tiles of ``block_k``; 1 or 3 TF32 passes; ``tile_sums``: each key
    tile's P V into fresh fragments, added to O in float32 (off: every tile's mma.sync accumulates into O);
    ``min_blocks``: blocks per SM asked of the compiler through launch bounds, which caps the registers per
    thread at what that many blocks leave (0: no bound; a GPU only, the simulator has no registers);
    ``prefetch``: the next key tile is loaded into registers while the warps work on this one, then stored to
    shared memory (off: each tile is loaded and stored before the work on it starts)."""

    warps: int = 4
    block_k: int = 64
    passes: int = 1
    tile_sums: bool = False
    min_blocks: int = 0
    prefetch: bool = False

    def __post_init__(self) -> None:
        require_whole("warps", self.warps, high=32)
        require_whole("block_k", self.block_k, high=1024)
        require_flag("tile_sums", self.tile_sums)
        require_flag("prefetch", self.prefetch)
        require_whole("min_blocks", self.min_blocks, low=0, high=HOPPER_SM["blocks"])
        if self.passes not in (1, 3):
            raise ValueError(f"passes must be 1 (TF32) or 3 (3xTF32, float32 accuracy), got {self.passes}")

    def tile_floats(self, d: int) -> tuple[int, int]:
        """The floats of each shared tile for head size ``d``, as the kernel declares them: K (rows padded by 4)
        and V transposed (rows padded by 4)."""
        return self.block_k * (d + 4), d * (self.block_k + 4)

    def shared_floats(self, d: int) -> int:
        """The floats of shared memory the tiles take: :meth:`tile_floats` summed."""
        return sum(self.tile_floats(d))

    def check(self, d: int) -> None:
        if d % 16:
            raise ValueError(f"d ({d}) must be a multiple of 16: two 8-wide k-steps per 16-byte read")
        if self.block_k % 16:
            raise ValueError(f"block_k ({self.block_k}) must be a multiple of 16: two 8-key n-tiles per read")
        holds = resident_blocks_per_sm(None, 32 * self.warps, 4 * self.shared_floats(d))
        if self.min_blocks > holds:
            raise ValueError(f"an SM holds {holds} blocks of {32 * self.warps} threads and "
                             f"{4 * self.shared_floats(d):,} bytes of shared memory, not {self.min_blocks}: "
                             "ask for fewer blocks (min_blocks)")
        if 4 * self.shared_floats(d) > SHARED_BYTES:
            raise ValueError(f"the K and V tiles need {4 * self.shared_floats(d):,} bytes of shared memory, over "
                             f"the {SHARED_BYTES:,} a block holds without opting in: use a smaller block_k")


TENSOR_CORE_CONFIG = r"numba (3x)?TF32 (?:tensor cores|(tile) sums) w(\d+)/k(\d+)(?: b(\d+))?( prefetch)?"  # the record's
ACCURATE = 1e-5  # the largest error against float64 (relative to the largest output) that 3xTF32 must keep to


def config_name(config: TensorCoreConfig) -> str:
    """The record's name of a shape, as :data:`TENSOR_CORE_CONFIG` reads it back."""
    precision = "3xTF32" if config.passes == 3 else "TF32"
    bound = f" b{config.min_blocks}" if config.min_blocks else ""
    kind = "tile sums" if config.tile_sums else "tensor cores"
    return f"numba {precision} {kind} w{config.warps}/k{config.block_k}{bound}{' prefetch' if config.prefetch else ''}"


@lru_cache(maxsize=2)
def measured_config(passes: int) -> TensorCoreConfig | None:
    """The shape the committed H200 record timed fastest at its longest sequence for this many passes, three passes
    only among those within :data:`ACCURATE` of float64 (3xTF32 is there for float32's accuracy); None until it has
    one."""
    shape = fastest_at_longest(TENSOR_CORE_CONFIG.replace("(3x)?", "3x" if passes == 3 else ""),
                               max_error=ACCURATE if passes == 3 else None)
    if shape is None:
        return None
    tile_sums, warps, block_k, min_blocks, prefetch = shape
    return TensorCoreConfig(warps, block_k, passes, bool(tile_sums), min_blocks, bool(prefetch))


def default_config(passes: int = 1, head_dim: int | None = None) -> TensorCoreConfig:
    """The measured best (:func:`measured_config`) where it fits ``head_dim``; else four warps with 64-key tiles
    for one pass up to d = 64, and 32-key tiles for three passes or a larger d.  In the simulator, which emulates
    every mma.sync, one warp and 16-key tiles."""
    if is_simulator():
        return TensorCoreConfig(1, 16, passes)
    measured = measured_config(passes)
    if measured is not None and (head_dim is None or fits(measured, head_dim)):
        return measured
    return TensorCoreConfig(4, 64 if passes == 1 and (head_dim or 64) <= 64 else 32, passes)


@cuda.jit(device=True, inline="always")
def keep(x):
    """``x`` as it is (a weight that keeps its precision)."""
    return x


def make_fragment_softmax(n_tiles, d_tiles, causal, round_p):
    """The online-softmax step of a warp whose scores sit in m16n8 accumulators, shared by the TF32 and bf16 kernels:
    mask; for each of the lane's rows (g: c0, c1; g + 8: c2, c3) update the running max and sum; rescale O; S
    becomes P, each weight first passed through ``round_p``.  For one TF32 pass that rounds it to TF32, so the sum
    and P V use the same weights; bf16 keeps float32 weights here and rounds them as it packs them for P V."""
    NT, DT = n_tiles, d_tiles  # compile-time constants
    NEG = float32(-math.inf)
    quad_max, _ = make_row_reductions(4)

    @cuda.jit(device=True, inline="always")
    def softmax_step(s, m, total, o, scratch, rows, t, start, length, masked):
        for h in range(2):
            row = rows + 8 * h
            top = NEG
            for n in range(NT):
                for j in range(2):
                    key = start + 16 * (n // 2) + 4 * t + 2 * (n % 2) + j
                    if masked and (key >= length or (causal and key > row)):
                        s[4 * n + 2 * h + j] = NEG
                    top = max(top, s[4 * n + 2 * h + j])
            m_new = max(m[h], quad_max(top, scratch))  # over the row's four lanes: t = 0 .. 3
            correction = math.exp2(m[h] - m_new)
            m[h] = m_new
            part = float32(0)
            for n in range(NT):
                for j in range(2):
                    p = round_p(math.exp2(s[4 * n + 2 * h + j] - m_new))
                    s[4 * n + 2 * h + j] = p
                    part += p
            total[h] = total[h] * correction + part
            for n in range(DT):
                o[4 * n + 2 * h] *= correction
                o[4 * n + 2 * h + 1] *= correction

    return softmax_step


def make_fragment_kernel(parts, sizes, tile_type, causal, min_blocks=0, prefetch=False):
    """The fused kernel of both tensor-core precisions: each warp owns 16 query rows; S and P stay in its mma
    fragments.  ``parts`` are the precision's device functions (load Q, stage K and V, the scores, the softmax
    step, the weighted sum, store a row); ``sizes`` its warps, key tile and array sizes; ``tile_type`` what its
    tiles and Q fragments hold (float32, or uint32 pairs of bf16); ``prefetch``: see :func:`make_tile_steps`."""
    load_q, stage, scores, softmax_step, weighted_sum, store_row = parts
    W, BK, K_SIZE, V_SIZE, Q_SIZE, S_SIZE, O_SIZE = sizes  # compile-time constants
    first, begin, HELD = make_tile_steps(stage, BK, prefetch)
    BQ, SCRATCH = 16 * W, 32 * W if is_simulator() else 1
    NEG = float32(-math.inf)
    _, quad_sum = make_row_reductions(4)  # a row's four lanes
    bounds = {"launch_bounds": (32 * W, min_blocks)} if min_blocks and not is_simulator() else {}

    @cuda.jit(**bounds)
    def fragment_attention_kernel(q, k, v, out, length, scale):
        # q, k, v, out: one head after another, flattened; 16-byte aligned
        lane = cuda.threadIdx.x % 32
        g, t = lane // 4, lane % 4
        qb = cuda.gridDim.x - 1 - cuda.blockIdx.x if causal else cuda.blockIdx.x  # causal: longest blocks first
        q0, head = qb * BQ, cuda.blockIdx.y * length
        rows = q0 + 16 * (cuda.threadIdx.x // 32) + g  # this lane's rows: rows and rows + 8
        k_s = cuda.shared.array(K_SIZE, tile_type, alignment=SHARED_ALIGN)
        vt_s = cuda.shared.array(V_SIZE, tile_type, alignment=SHARED_ALIGN)
        scratch = cuda.shared.array(SCRATCH, float32)  # the simulator's stand-in for warp shuffles
        qf = cuda.local.array(Q_SIZE, tile_type)  # Q's A fragments, for every step over d
        s = cuda.local.array(S_SIZE, float32)
        o = cuda.local.array(O_SIZE, float32)
        m = cuda.local.array(2, float32)
        total = cuda.local.array(2, float32)
        held = cuda.local.array(HELD, float32)  # this thread's share of a K and V tile, on its way to shared memory
        load_q(q, qf, head + rows, head + length, t, scale)
        for i in range(O_SIZE):
            o[i] = float32(0)
        m[0], m[1], total[0], total[1] = NEG, NEG, float32(0), float32(0)
        keys = min(length, q0 + BQ) if causal else length
        first(k, v, held, head, head + length)
        for start in range(0, keys, BK):
            begin(k, v, k_s, vt_s, held, head + start, start + BK < keys, head + length)
            scores(qf, k_s, s, g, t, scale)
            masked = start + BK > length or (causal and start + BK - 1 > q0)  # the same for the whole block
            softmax_step(s, m, total, o, scratch, rows, t, start, length, masked)
            weighted_sum(s, vt_s, o, g, t)
            cuda.syncthreads()  # before the next tiles overwrite K and V
        for h in range(2):
            whole = quad_sum(total[h], scratch)
            if rows + 8 * h < length:
                store_row(out, o, whole, h, head + rows + 8 * h, t)

    return fragment_attention_kernel


def make_tf32_product(passes):
    """One m16n8k8 product, its A fragment split beforehand by ``split_a`` (A fragments are reused across a row
    of products, so they are split once), its B fragment split here: TF32 fragments for one pass, float32 ones
    split in three for three."""
    THREE = passes == 3  # compile-time constant

    @cuda.jit(device=True, inline="always")
    def split(x):
        """(big, small): x's TF32 part and the TF32 of the rest (x itself and 0 for one pass: it is TF32 already)."""
        if THREE:
            big = tf32(x)
            return big, tf32(x - big)
        return x, float32(0)

    @cuda.jit(device=True, inline="always")
    def split_a(x0, x1, x2, x3):
        """An A fragment's four values split: (big0, big1, big2, big3, small0, small1, small2, small3)."""
        x0, s0 = split(x0)
        x1, s1 = split(x1)
        x2, s2 = split(x2)
        x3, s3 = split(x3)
        return x0, x1, x2, x3, s0, s1, s2, s3

    @cuda.jit(device=True, inline="always")
    def mma(a, b0, b1, c0, c1, c2, c3):
        """One product, ``a`` from ``split_a``: small x big, big x small and big x big for three passes."""
        a0, a1, a2, a3, sa0, sa1, sa2, sa3 = a
        if THREE:
            b0, sb0 = split(b0)
            b1, sb1 = split(b1)
            c0, c1, c2, c3 = mma_tf32(sa0, sa1, sa2, sa3, b0, b1, c0, c1, c2, c3)
            c0, c1, c2, c3 = mma_tf32(a0, a1, a2, a3, sb0, sb1, c0, c1, c2, c3)
        return mma_tf32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3)

    return split_a, mma


def make_tf32_stage(head_dim, block_k, threads, passes):
    """A tile of K (as it is) and of V (transposed), zeros past ``end``, rounded to TF32 for one pass.  Returns
    ``stage``, which loads each of this thread's pieces and stores it to shared memory in turn, and ``(fetch, put,
    HELD)``, the same in two steps: ``fetch`` loads this thread's whole share into registers (``held``, HELD
    floats), ``put`` stores it."""
    D4, BK, THREADS, THREE = head_dim // 4, block_k, threads, passes == 3  # compile-time constants
    KS4, VS4 = (head_dim + 4) // 4, (block_k + 4) // 4  # padded row strides of the two tiles, in float4s
    EACH = -(-BK * D4 // THREADS)  # float4s of K (and of V) per thread

    @cuda.jit(device=True, inline="always")
    def load(k, v, e, row0, end):
        """Piece ``e``: dims ``4 (e // BK) .. + 3`` of key ``e % BK`` of K and of V (neighbouring lanes take
        neighbouring keys, so the transposed stores do not conflict)."""
        r, c4 = e % BK, e // BK
        x0 = x1 = x2 = x3 = y0 = y1 = y2 = y3 = float32(0)
        if row0 + r < end:
            x0, x1, x2, x3 = load4(k, (row0 + r) * D4 + c4)
            y0, y1, y2, y3 = load4(v, (row0 + r) * D4 + c4)
        return x0, x1, x2, x3, y0, y1, y2, y3

    @cuda.jit(device=True, inline="always")
    def store(k_s, vt_s, e, x0, x1, x2, x3, y0, y1, y2, y3):
        r, c4 = e % BK, e // BK
        if not THREE:
            x0, x1, x2, x3, y0, y1, y2, y3 = (tf32(x0), tf32(x1), tf32(x2), tf32(x3),
                                              tf32(y0), tf32(y1), tf32(y2), tf32(y3))
        store4(k_s, r * KS4 + c4, x0, x1, x2, x3)
        base = 4 * c4 * 4 * VS4 + r
        vt_s[base], vt_s[base + 4 * VS4], vt_s[base + 8 * VS4], vt_s[base + 12 * VS4] = y0, y1, y2, y3

    @cuda.jit(device=True, inline="always")
    def stage(k, v, k_s, vt_s, row0, end):
        for e in range(cuda.threadIdx.x, BK * D4, THREADS):
            x0, x1, x2, x3, y0, y1, y2, y3 = load(k, v, e, row0, end)
            store(k_s, vt_s, e, x0, x1, x2, x3, y0, y1, y2, y3)

    @cuda.jit(device=True, inline="always")
    def fetch(k, v, held, row0, end):
        for j in range(EACH):
            e = cuda.threadIdx.x + j * THREADS
            if e < BK * D4:
                (held[8 * j], held[8 * j + 1], held[8 * j + 2], held[8 * j + 3], held[8 * j + 4], held[8 * j + 5],
                 held[8 * j + 6], held[8 * j + 7]) = load(k, v, e, row0, end)

    @cuda.jit(device=True, inline="always")
    def put(held, k_s, vt_s):
        for j in range(EACH):
            e = cuda.threadIdx.x + j * THREADS
            if e < BK * D4:
                store(k_s, vt_s, e, held[8 * j], held[8 * j + 1], held[8 * j + 2], held[8 * j + 3], held[8 * j + 4],
                      held[8 * j + 5], held[8 * j + 6], held[8 * j + 7])

    return stage, (fetch, put, 8 * EACH)


def make_tile_steps(stage, block_k, prefetch):
    """The key-tile steps of the fused kernel: ``first(k, v, held, row0, end)`` before the loop, and ``begin(k, v,
    k_s, vt_s, held, row0, more, end)`` at the top of each tile, which leaves the tile in shared memory for every
    warp.  ``stage`` is a precision's one-step stage ``(k, v, k_s, vt_s, row0, end)``, or that and ``(fetch, put,
    HELD)``; with ``prefetch`` each tile is put from registers and the next one (when ``more``) fetched at once,
    its loads in flight while the warps work.  Returns (first, begin, HELD)."""
    BK = block_k  # compile-time constant
    stage, (fetch, put, held_size) = stage if isinstance(stage, tuple) else (stage, (None, None, 1))
    if prefetch and fetch is None:
        raise ValueError("this precision stages a tile in one step: it cannot prefetch")

    @cuda.jit(device=True, inline="always")
    def nothing(k, v, held, row0, end):
        pass

    @cuda.jit(device=True, inline="always")
    def begin_staged(k, v, k_s, vt_s, held, row0, more, end):
        stage(k, v, k_s, vt_s, row0, end)
        cuda.syncthreads()

    @cuda.jit(device=True, inline="always")
    def begin_prefetched(k, v, k_s, vt_s, held, row0, more, end):
        put(held, k_s, vt_s)  # fetched during the last tile (or by ``first``)
        cuda.syncthreads()
        if more:
            fetch(k, v, held, row0 + BK, end)

    return (fetch, begin_prefetched, held_size) if prefetch else (nothing, begin_staged, 1)


def make_tf32_products(head_dim, block_k, product):
    """S = Q K^T and O += P V for one warp's 16 rows, every fragment one 16-byte shared read."""
    KS4, VS4 = (head_dim + 4) // 4, (block_k + 4) // 4
    NT, DT, KP, S_SIZE = block_k // 8, head_dim // 8, head_dim // 16, 4 * (block_k // 8)
    split_a, mma = product

    @cuda.jit(device=True, inline="always")
    def scores(qf, k_s, s, g, t, scale):  # scale: unused, Q was scaled as it was loaded
        """S = Q K^T for the warp's 16 rows.  Key ``16 (n // 2) + 4 (j // 2) + 2 (n % 2) + j % 2`` is column j
        of n-tile n, and dims ``16 p + 4 t .. + 3`` are lane t's in k-steps 2p and 2p + 1: one 16-byte read."""
        for i in range(S_SIZE):
            s[i] = float32(0)
        for p in range(KP):
            q = 8 * p
            a = split_a(qf[q], qf[q + 4], qf[q + 1], qf[q + 5])  # k-step 2p, for every n-tile
            b = split_a(qf[q + 2], qf[q + 6], qf[q + 3], qf[q + 7])  # k-step 2p + 1
            for n in range(NT):
                key = 16 * (n // 2) + 4 * (g // 2) + 2 * (n % 2) + g % 2
                y0, y1, y2, y3 = load4(k_s, key * KS4 + 4 * p + t)
                s[4 * n], s[4 * n + 1], s[4 * n + 2], s[4 * n + 3] = mma(
                    a, y0, y1, s[4 * n], s[4 * n + 1], s[4 * n + 2], s[4 * n + 3])
                s[4 * n], s[4 * n + 1], s[4 * n + 2], s[4 * n + 3] = mma(
                    b, y2, y3, s[4 * n], s[4 * n + 1], s[4 * n + 2], s[4 * n + 3])

    @cuda.jit(device=True, inline="always")
    def weighted_sum(s, vt_s, o, g, t):
        """O += P V.  P's accumulator fragment is already an A fragment, once V's rows are taken in the order of
        S's columns: lane t's keys of n-tiles 2p and 2p + 1 are ``16 p + 4 t .. + 3``, one 16-byte read."""
        for p in range(NT // 2):
            i, j = 8 * p, 8 * p + 4
            a = split_a(s[i], s[i + 2], s[i + 1], s[i + 3])  # n-tile 2p of P, for every n-tile of O
            b = split_a(s[j], s[j + 2], s[j + 1], s[j + 3])  # n-tile 2p + 1
            for n in range(DT):
                z0, z1, z2, z3 = load4(vt_s, (8 * n + g) * VS4 + 4 * p + t)
                o[4 * n], o[4 * n + 1], o[4 * n + 2], o[4 * n + 3] = mma(
                    a, z0, z1, o[4 * n], o[4 * n + 1], o[4 * n + 2], o[4 * n + 3])
                o[4 * n], o[4 * n + 1], o[4 * n + 2], o[4 * n + 3] = mma(
                    b, z2, z3, o[4 * n], o[4 * n + 1], o[4 * n + 2], o[4 * n + 3])

    return scores, weighted_sum


def make_tile_sums(weighted_sum, o_size):
    """``weighted_sum`` into fresh zero fragments, then added to O in float32 (rounded to nearest): O takes one
    rounded addition per key tile instead of every mma.sync's own (maybe truncated) float32 sum."""
    O_SIZE = o_size  # compile-time constant

    @cuda.jit(device=True, inline="always")
    def tile_sum(s, vt_s, o, g, t):
        tile = cuda.local.array(O_SIZE, float32)
        for i in range(O_SIZE):
            tile[i] = float32(0)
        weighted_sum(s, vt_s, tile, g, t)
        for i in range(O_SIZE):
            o[i] += tile[i]

    return tile_sum


def make_tf32_rows(head_dim, passes):
    """Load the lane's two rows of Q as A fragments; store its two columns of an output row."""
    D, D4, KP, DT, THREE = head_dim, head_dim // 4, head_dim // 16, head_dim // 8, passes == 3

    @cuda.jit(device=True, inline="always")
    def load_q(q, qf, rows, length, t, scale):
        """Head columns ``16 p + 4 t .. + 3`` of the lane's two rows, scaled (and for one pass rounded to TF32)."""
        for p in range(KP):
            for h in range(2):
                x0 = x1 = x2 = x3 = float32(0)
                if rows + 8 * h < length:
                    x0, x1, x2, x3 = load4(q, (rows + 8 * h) * D4 + 4 * p + t)
                x0, x1, x2, x3 = x0 * scale, x1 * scale, x2 * scale, x3 * scale
                if not THREE:  # one pass: Q rounded to TF32 once, here
                    x0, x1, x2, x3 = tf32(x0), tf32(x1), tf32(x2), tf32(x3)
                i = 8 * p + 4 * h
                qf[i], qf[i + 1], qf[i + 2], qf[i + 3] = x0, x1, x2, x3

    @cuda.jit(device=True, inline="always")
    def store_row(out, o, whole, h, row, t):
        """The lane's two columns of each 8-column n-tile of one output row, divided by the row's sum."""
        for n in range(DT):
            out[row * D + 8 * n + 2 * t] = o[4 * n + 2 * h] / whole
            out[row * D + 8 * n + 2 * t + 1] = o[4 * n + 2 * h + 1] / whole

    return load_q, store_row


def make_tensor_core_attention_kernel(head_dim, warps, block_k, causal, passes, tile_sums=False, min_blocks=0,
                                      prefetch=False):
    """Fused attention on TF32 tensor cores: each warp owns 16 query rows; S and P stay in its fragments
    (``tile_sums``: each key tile's P V summed apart, then added to O)."""
    D, BK, NT, DT = head_dim, block_k, block_k // 8, head_dim // 8
    k_size, v_size = TensorCoreConfig(warps, block_k, passes).tile_floats(D)  # the sizes its check adds up
    sizes = (warps, BK, k_size, v_size, 8 * (D // 16), 4 * NT, 4 * DT)  # K, V, Q, S and O sizes
    scores, weighted_sum = make_tf32_products(D, BK, make_tf32_product(passes))
    if tile_sums:
        weighted_sum = make_tile_sums(weighted_sum, 4 * DT)
    load_q, store_row = make_tf32_rows(D, passes)
    parts = (load_q, make_tf32_stage(D, BK, 32 * warps, passes), scores,
             make_fragment_softmax(NT, DT, causal, keep if passes == 3 else tf32), weighted_sum, store_row)
    return make_fragment_kernel(parts, sizes, float32, causal, min_blocks, prefetch)


# --- the unfused pipeline on tensor cores: S = Q K^T and O = P V as TF32 products through memory ------------


def make_gemm_kernel(b_is_n_by_k, causal):
    """C = scale A B for each head, on TF32 tensor cores: A is M x K, B is N x K (``b_is_n_by_k``: K's rows, for
    Q K^T) or K x N (V, for P V), C is M x N; flat arrays, one head after another.  A block of four warps computes
    a 64 x 64 tile of C, 16 rows a warp; tiles of A and B pass through shared memory 16 columns of K at a time,
    with the head columns (or keys) permuted as in the fused kernel so that each fragment is one 16-byte read.
    ``causal`` writes -inf above the diagonal (column > row)."""
    BM, BN, BK, W = 64, 64, 16, 4
    AS4 = (BK + 4) // 4  # padded rows of the A and B tiles, in float4s
    A_SIZE, B_SIZE, C_SIZE = BM * (BK + 4), BN * (BK + 4), 4 * (BN // 8)

    @cuda.jit
    def gemm_tf32_kernel(a, b, c, m_rows, n_cols, k_depth, scale):
        head, t = cuda.blockIdx.z, cuda.threadIdx.x
        lane, warp = t % 32, t // 32
        g, q = lane // 4, lane % 4
        m0, n0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        a_s = cuda.shared.array(A_SIZE, float32, alignment=SHARED_ALIGN)
        b_s = cuda.shared.array(B_SIZE, float32, alignment=SHARED_ALIGN)  # B as N x K: a row per column of C
        acc = cuda.local.array(C_SIZE, float32)
        for i in range(C_SIZE):
            acc[i] = float32(0)
        a0, b0, c0 = head * m_rows * k_depth, head * n_cols * k_depth, head * m_rows * n_cols
        for kk in range(0, k_depth, BK):
            for e in range(t, BM * BK, 32 * W):  # neighbouring threads: neighbouring columns of K
                r, col = e // BK, e % BK
                inside = m0 + r < m_rows and kk + col < k_depth
                a_s[r * (BK + 4) + col] = tf32(a[a0 + (m0 + r) * k_depth + kk + col]) if inside else float32(0)
                if b_is_n_by_k:
                    inside = n0 + r < n_cols and kk + col < k_depth
                    value = b[b0 + (n0 + r) * k_depth + kk + col] if inside else float32(0)
                else:  # B is K x N: read along N, store transposed
                    r, col = e % BN, e // BN
                    inside = n0 + r < n_cols and kk + col < k_depth
                    value = b[b0 + (kk + col) * n_cols + n0 + r] if inside else float32(0)
                b_s[r * (BK + 4) + col] = tf32(value)
            cuda.syncthreads()
            x0, x1, x2, x3 = load4(a_s, (16 * warp + g) * AS4 + q)  # rows g and g + 8 of this warp's 16
            y0, y1, y2, y3 = load4(a_s, (16 * warp + g + 8) * AS4 + q)
            for n in range(BN // 8):
                z0, z1, z2, z3 = load4(b_s, (8 * n + g) * AS4 + q)
                i = 4 * n
                acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = mma_tf32(
                    x0, y0, x1, y1, z0, z1, acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
                acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = mma_tf32(
                    x2, y2, x3, y3, z2, z3, acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
            cuda.syncthreads()
        for n in range(BN // 8):
            for h in range(2):
                row = m0 + 16 * warp + g + 8 * h
                for j in range(2):
                    col = n0 + 8 * n + 2 * q + j
                    if row < m_rows and col < n_cols:
                        value = acc[4 * n + 2 * h + j] * scale
                        c[c0 + row * n_cols + col] = float32(-math.inf) if causal and col > row else value

    return gemm_tf32_kernel


_gemm_kernel = lru_cache(maxsize=None)(make_gemm_kernel)


def _gemm(a: Any, b: Any, c: Any, heads: int, m: int, n: int, k: int, scale: float, b_is_n_by_k: bool,
          causal: bool) -> None:
    grid = ((n + 63) // 64, (m + 63) // 64, heads)
    _gemm_kernel(b_is_n_by_k, causal)[grid, 128](a, b, c, m, n, k, float32(scale))


def run_unfused_tensor_cores(q: Any, k: Any, v: Any, s: Any, p: Any, out: Any, causal: bool = False) -> None:
    """S = Q K^T / sqrt(d) on TF32 tensor cores, written to ``s``; the softmax of each row into ``p``; then
    O = P V on tensor cores: the unfused pipeline, S and P through memory, with TF32 products."""
    heads, length, d = require_flat_qkv(q, k, v, out, "the unfused TF32 pipeline")
    causal = require_flag("causal", causal)
    require_scratch(q, k, v, s, p, out)
    if heads == 0 or length == 0:
        return
    flat = heads * length * d
    q, k, v, out = q.reshape(flat), k.reshape(flat), v.reshape(flat), out.reshape(flat)
    s_flat, p_flat = s.reshape(heads * length * length), p.reshape(heads * length * length)
    _gemm(q, k, s_flat, heads, length, length, d, 1 / math.sqrt(d), True, causal)
    unfused_softmax(s, p)
    _gemm(p_flat, v, out, heads, length, d, length, 1.0, False, False)


def tensor_core_kernel(head_dim: int, config: TensorCoreConfig, causal: bool) -> Any:
    """The kernel for this head size, shape, masking and number of passes (compiled once each)."""
    return checked_kernel(_make, head_dim, config, causal)


def _make(d: int, c: TensorCoreConfig, causal: bool) -> Any:
    return make_tensor_core_attention_kernel(d, c.warps, c.block_k, causal, c.passes, c.tile_sums, c.min_blocks,
                                             c.prefetch)


def run_tensor_cores(q: Any, k: Any, v: Any, out: Any, causal: bool = False,
                     config: TensorCoreConfig | None = None) -> None:
    """One launch of the TF32 tensor-core kernel; allocates nothing.  Contiguous, 16-byte-aligned arrays."""
    heads, length, d = require_flat_qkv(q, k, v, out, "the tensor-core kernel")
    config = checked_config(config or default_config(1, d), TensorCoreConfig)
    kernel = tensor_core_kernel(d, config, require_flag("causal", causal))
    if heads and length:
        rows = 16 * config.warps
        launch_flat(kernel, ((length + rows - 1) // rows, heads), 32 * config.warps, q, k, v, out)


def count_tensor_cores(heads: int = 1, length: int = 40, d: int = 16, causal: bool = False,
                       shape: tuple[int, int, int] = (1, 16, 1)) -> list[Ledger]:
    """The tensor-core kernel once on random inputs, in a ledger (for :meth:`Ledger.counted_in_simulator`)."""
    q, k, v, out = random_qkv(heads, length, d)
    with Ledger(f"tensor cores causal={causal}") as ledger:
        run_tensor_cores(q, k, v, out, causal, TensorCoreConfig(*shape))
    return [ledger]


def compile_request(request: dict[str, Any]) -> dict[str, str]:
    """PTX of the kernel for each ``[d, causal, warps, block_k, passes]`` in ``request["shapes"]``, a sixth 1 for
    tile sums, a seventh for min_blocks, an eighth 1 for prefetch (run with the real compiler by
    ``helpers.counting.other_backend``; no GPU needed)."""
    return compile_shapes(request, lambda d, causal, warps, block_k, passes, tile_sums=0, min_blocks=0, prefetch=0:
                          make_tensor_core_attention_kernel(d, warps, block_k, bool(causal), passes, bool(tile_sums),
                                                            min_blocks, bool(prefetch)), flat_signature(float32))
