"""The register-tiled and tensor-core fused attention: float64 answers at awkward shapes, counts, refusals, PTX."""

import json
import re

import numpy as np
import pytest
from numba import cuda

import helpers

from helpers.backend import COMPILER
from helpers.checks import poisoned
from helpers.device import registers_per_thread
from helpers.counting.other_backend import run_under
from helpers.ledger import Ledger
from helpers.lessons.attention import kernels as at
from helpers.lessons.attention import bf16
from helpers.lessons.attention.measure import TF32_TOLERANCE, TOLERANCE
from helpers.lessons.attention import tensor_cores as tc
from helpers.lessons.attention import tiled

from attention_support import inputs, relative_error


@pytest.mark.parametrize("heads, length, d, causal, shape", [
    (2, 77, 16, False, None),  # 77 rows and keys: no multiple of any tile
    (1, 77, 16, True, None),
    (1, 1, 32, True, None),  # one row: one key, its own
    (1, 1, 32, False, None),
    (1, 33, 64, True, (32, 16, 2, 2)),
    (1, 20, 128, False, None),
])
def test_tiled_matches_float64(heads, length, d, causal, shape):
    q, k, v = inputs(heads, length, d, seed=0)
    out = poisoned(heads * length * d).reshape(heads, length, d)
    config = tiled.TiledConfig(*shape) if shape else None
    tiled.run_tiled(*(cuda.to_device(a) for a in (q, k, v)), out, causal=causal, config=config)
    got = out.copy_to_host()
    assert not np.isnan(got).any(), "a poisoned output element was never written"
    assert relative_error(got, at.reference(q, k, v, causal)) < 1e-5


def test_the_output_may_be_q_but_not_k_or_v():
    q, k, v = (cuda.to_device(a) for a in inputs(1, 40, 16, seed=0))
    want = at.reference(q.copy_to_host(), k.copy_to_host(), v.copy_to_host())
    with pytest.raises(ValueError, match="`out` and `k` are the same array"):
        tiled.run_tiled(q, k, v, k)
    tiled.run_tiled(q, k, v, q)  # a block stages its rows of Q before any block writes
    assert relative_error(q.copy_to_host(), want) < 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_the_ledger_counts_q_and_out_once_and_k_and_v_once_per_block_of_rows(causal):
    [ledger] = Ledger.counted_in_simulator(tiled.count_tiled, heads=1, length=40, d=16, causal=causal)
    assert ledger.bytes_by_array() == tiled.tiled_traffic(1, 40, 16, causal, tiled.TiledConfig(32, 16, 2, 4))
    assert ledger.trips == 2


def test_causal_attention_computes_about_half_the_pairs():
    assert at.attention_flops(1, 4, 8, causal=True) == 4 * 8 * (1 + 2 + 3 + 4)
    assert at.attention_flops(2, 4096, 64, causal=False) == 4 * 64 * 2 * 4096 ** 2
    half = at.attention_flops(1, 4096, 64, True) / at.attention_flops(1, 4096, 64, False)
    assert 0.5 < half < 0.5002


@pytest.mark.parametrize("shape, d, words", [
    ((64, 64, 4, 4), 64, "shared memory"),
    ((64, 64, 4, 1), 64, "one warp"),
    ((64, 32, 4, 4), 16, "multiple of 4 x 8"),
    ((12, 32, 4, 4), 64, "whole warps"),
    ((64, 30, 4, 3), 64, "multiple of 4 \\(16-byte reads of P\\)"),
])
def test_a_shape_the_kernel_cannot_run_is_refused_by_its_rule(shape, d, words):
    with pytest.raises(ValueError, match=words):
        tiled.tiled_kernel(d, tiled.TiledConfig(*shape), False)


def test_misaligned_or_strided_arrays_are_refused():
    q, k, v = (cuda.to_device(a) for a in inputs(1, 8, 16, seed=0))
    shifted = cuda.to_device(np.zeros(8 * 16 + 1, np.float32))[1:].reshape(1, 8, 16)
    with pytest.raises(ValueError, match="16-byte boundary"):
        tiled.run_tiled(q, k, v, shifted)
    with pytest.raises(TypeError, match="TiledConfig"):
        tiled.run_tiled(q, k, v, poisoned(8 * 16).reshape(1, 8, 16), config=at.FlashConfig())


@pytest.mark.skipif(bool(COMPILER[0]), reason="the PTX is numba-cuda's")
def test_the_compiled_kernel_keeps_its_tiles_in_registers_and_reads_16_bytes_at_a_time():
    """No local memory (the micro-tiles are registers), 16-byte shared and global accesses, warp shuffles
    for the row maxima and sums, and ``ex2`` for the exponentials: read from the PTX numba-cuda writes."""
    shapes = [[64, 0, 64, 32, 4, 4], [64, 1, 64, 32, 4, 4]]
    compiled = run_under("compiler", "helpers.lessons.attention.tiled:compile_request", {"shapes": shapes, "cc": [9, 0]})
    for shape in shapes:
        ptx = compiled[json.dumps(shape)]
        assert ".local" not in ptx, f"{shape}: part of a micro-tile lives in local memory"
        assert ptx.count("ld.shared.v4.f32") >= 20
        for opcode in ("ld.global.v4.f32", "st.global.v4.f32", "st.shared.v4.f32", "shfl.sync.bfly", "ex2.approx"):
            assert opcode in ptx, f"{shape}: no {opcode}"


# --- TF32 tensor cores ------------------------------------------------------------------------------

if helpers.is_simulator():  # the emulated mma.sync is slow: two small shapes that still cross tiles and rows
    TENSOR_CORE_CASES = [(1, 20, 16, False, (1, 16, 1)), (1, 20, 16, True, (1, 16, 3))]
else:  # a GPU runs the real instruction at every awkward shape
    TENSOR_CORE_CASES = [(2, length, d, causal, (4, 64 if d < 128 else 32, passes))
                         for length in (1, 77, 1000) for d in (16, 32, 64, 128)
                         for causal in (False, True) for passes in (1, 3)]


@pytest.mark.parametrize("heads, length, d, causal, shape", TENSOR_CORE_CASES)
def test_tensor_core_attention_matches_float64(heads, length, d, causal, shape):
    """One TF32 pass within the benchmark's TF32 tolerance (2e-3 of the largest output); three passes (3xTF32) within
    its float32 one (1e-4). 3xTF32 aims at float32's accuracy and falls short: on the H200 its error reached 1.1e-5 at
    L = 1000, d = 64, where the FP32 kernels stay near 2e-6 (lesson 13 names it as open)."""
    q, k, v = inputs(heads, length, d, seed=0)
    out = poisoned(heads * length * d).reshape(heads, length, d)
    config = tc.TensorCoreConfig(*shape)
    tc.run_tensor_cores(*(cuda.to_device(a) for a in (q, k, v)), out, causal=causal, config=config)
    got = out.copy_to_host()
    assert not np.isnan(got).any(), "a poisoned output element was never written"
    assert relative_error(got, at.reference(q, k, v, causal)) < (TOLERANCE if config.passes == 3 else TF32_TOLERANCE)


TILE_SUM_CASES = [(1, length, d, causal, passes) for length in (1, 17, 40) for d in (16, 32) for causal in (False, True)
                  for passes in ((3,) if helpers.is_simulator() else (1, 3))]
if helpers.is_simulator():  # each length, head size and masking once, and L = 1 both ways
    TILE_SUM_CASES = [TILE_SUM_CASES[i] for i in (0, 3, 6, 9)]
# Whether tile sums reach 1e-5 at L = 4096 on a GPU is a measurement (the attention record), not a test.


@pytest.mark.parametrize("heads, length, d, causal, passes", TILE_SUM_CASES)
def test_tile_sums_match_float64_and_change_nothing_within_one_key_tile(heads, length, d, causal, passes):
    """Each key tile's P V summed in fresh fragments, then added to O: within 1e-5 of the largest output for
    3xTF32 and within the TF32 tolerance for one pass, at short lengths.  Up to one key tile, O = 0 + tile: bit for bit the kernel without tile sums."""
    q, k, v = inputs(heads, length, d, seed=1)
    base = tc.default_config(passes, d)
    got = {}
    for tile_sums in (False, True):
        out = poisoned(heads * length * d).reshape(heads, length, d)
        config = tc.TensorCoreConfig(base.warps, base.block_k, passes, tile_sums)
        tc.run_tensor_cores(*(cuda.to_device(a) for a in (q, k, v)), out, causal=causal, config=config)
        got[tile_sums] = out.copy_to_host()
    assert not np.isnan(got[True]).any(), "a poisoned output element was never written"
    error = relative_error(got[True], at.reference(q, k, v, causal))
    assert error < (1e-5 if passes == 3 else TF32_TOLERANCE), f"error {error:.1e}"
    if length <= base.block_k:
        assert np.array_equal(got[True], got[False])
    with pytest.raises(TypeError, match="tile_sums"):
        tc.TensorCoreConfig(4, 64, 3, "yes")


PREFETCH_CASES = [(2, length, d, causal) for length in (1, 40, 77) for d in (16, 64) for causal in (False, True)]
if helpers.is_simulator():  # one case: the simulator emulates every mma.sync, slowly
    PREFETCH_CASES = [PREFETCH_CASES[5]]  # L = 40, d = 16, causal: two key tiles and a part


@pytest.mark.parametrize("heads, length, d, causal", PREFETCH_CASES)
def test_prefetch_changes_when_tiles_load_not_the_arithmetic(heads, length, d, causal):
    """With the next key tile fetched into registers while the warps work on this one, every output is bit for bit
    the kernel's without (one TF32 pass; on a GPU at the fastest shapes' warps and tiles too); and a stage that
    loads and stores in one step is refused a prefetch."""
    q, k, v = inputs(heads, length, d, seed=2)
    shapes = [(1, 16)] if helpers.is_simulator() else [(8, 32), (8, 64), (4, 32)]
    for warps, block_k in shapes:
        got = {}
        for prefetch in (False, True):
            out = poisoned(heads * length * d).reshape(heads, length, d)
            config = tc.TensorCoreConfig(warps, block_k, 1, prefetch=prefetch)
            tc.run_tensor_cores(*(cuda.to_device(a) for a in (q, k, v)), out, causal=causal, config=config)
            got[prefetch] = out.copy_to_host()
        assert not np.isnan(got[True]).any(), "a poisoned output element was never written"
        assert np.array_equal(got[True], got[False]), f"w{warps}/k{block_k}"
        assert relative_error(got[True], at.reference(q, k, v, causal)) < TF32_TOLERANCE
    with pytest.raises(ValueError, match="cannot prefetch"):
        tc.make_tile_steps(lambda *args: None, 16, True)
    assert tc.config_name(tc.TensorCoreConfig(8, 32, 1, prefetch=True)) == "numba TF32 tensor cores w8/k32 prefetch"


@pytest.mark.skipif(helpers.is_simulator(), reason="a GPU runs the tiled kernel at every awkward shape")
@pytest.mark.parametrize("length", [1, 77, 1000])
@pytest.mark.parametrize("d", [16, 32, 64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_matches_float64_at_every_awkward_shape_on_a_gpu(length, d, causal):
    q, k, v = inputs(2, length, d, seed=0)
    out = poisoned(2 * length * d).reshape(2, length, d)
    tiled.run_tiled(*(cuda.to_device(a) for a in (q, k, v)), out, causal=causal)
    assert relative_error(out.copy_to_host(), at.reference(q, k, v, causal)) < 1e-5


def test_tf32_rounds_to_ten_mantissa_bits():
    """1 + 2^-11 is halfway between two TF32 numbers and rounds away from zero; 1 + 2^-12 rounds down."""
    x = cuda.to_device(np.array([1 + 2.0 ** -11, 1 + 2.0 ** -12, -(1 + 2.0 ** -11), 3.0], np.float32))
    got = cuda.device_array(4, np.float32)
    round_all[1, 4](x, got)
    assert got.copy_to_host().tolist() == [1 + 2.0 ** -10, 1.0, -(1 + 2.0 ** -10), 3.0]


@cuda.jit
def round_all(x, out):
    i = cuda.threadIdx.x
    out[i] = tc.tf32(x[i])


@pytest.mark.parametrize("shape, d, words", [
    ((4, 64, 1), 24, "multiple of 16"),
    ((4, 24, 1), 64, "block_k \\(24\\) must be a multiple of 16"),
    ((4, 128, 1), 64, "shared memory"),
])
def test_a_tensor_core_shape_the_kernel_cannot_run_is_refused_by_its_rule(shape, d, words):
    with pytest.raises(ValueError, match=words):
        tc.tensor_core_kernel(d, tc.TensorCoreConfig(*shape), False)
    with pytest.raises(ValueError, match="passes must be 1"):
        tc.TensorCoreConfig(4, 64, 2)


def test_launch_bounds_are_checked_named_and_run():
    """min_blocks asks the compiler for that many blocks an SM: refused past the SM's threads, named in the record
    as the default rule reads it back, and on a GPU the registers fit (the simulator has none to cap)."""
    with pytest.raises(ValueError, match="min_blocks"):
        tc.TensorCoreConfig(8, 32, 1, min_blocks=-1)
    with pytest.raises(ValueError, match="an SM holds 8 blocks of 256 threads and 17,920 bytes of shared memory, not 9"):
        tc.tensor_core_kernel(64, tc.TensorCoreConfig(8, 32, 1, min_blocks=9), False)
    for config, name in ((tc.TensorCoreConfig(8, 32, 1, min_blocks=2), "numba TF32 tensor cores w8/k32 b2"),
                         (tc.TensorCoreConfig(4, 64, 3), "numba 3xTF32 tensor cores w4/k64")):
        assert tc.config_name(config) == name and re.fullmatch(tc.TENSOR_CORE_CONFIG, name)
    tiles = tc.config_name(tc.TensorCoreConfig(8, 64, 3, tile_sums=True))
    assert tiles == "numba 3xTF32 tile sums w8/k64" and re.fullmatch(tc.TENSOR_CORE_CONFIG, tiles)
    simulated = helpers.is_simulator()
    config = tc.TensorCoreConfig(1, 16, 1, min_blocks=4) if simulated else tc.TensorCoreConfig(8, 32, 1, min_blocks=2)
    d = 16 if simulated else 64
    q, k, v = inputs(2, 77, d, seed=3)
    out = poisoned(2 * 77 * d).reshape(2, 77, d)
    tc.run_tensor_cores(*(cuda.to_device(a) for a in (q, k, v)), out, causal=False, config=config)
    assert relative_error(out.copy_to_host(), at.reference(q, k, v, False)) < TF32_TOLERANCE
    if not simulated:
        assert registers_per_thread(tc.tensor_core_kernel(64, config, False)) <= 65536 // (32 * 8 * 2)


@pytest.mark.parametrize("causal", [False, True])
def test_the_ledger_counts_the_tensor_core_kernel_like_the_tiled_one(causal):
    """16 query rows per block of one warp and 16-key tiles: the same reads as a tiled kernel of that shape."""
    [ledger] = Ledger.counted_in_simulator(tc.count_tensor_cores, heads=1, length=40, d=16, causal=causal)
    assert ledger.bytes_by_array() == tiled.tiled_traffic(1, 40, 16, causal, tiled.TiledConfig(16, 16, 4, 4))


@pytest.mark.skipif(bool(COMPILER[0]), reason="the PTX is numba-cuda's")
def test_the_tensor_core_kernel_compiles_to_mma_sync_with_its_fragments_in_registers():
    """Every 16 x 8 x 8 product is one mma.sync, three for 3xTF32, fully unrolled, with no local memory.
    d = 64 and 64-key tiles: 64 products for Q K^T and 64 for P V per tile; 32-key tiles: 32 and 32, x 3.
    Tile sums (a sixth 1) keep the same instruction and count, their fresh fragments in registers too; launch
    bounds (a seventh number) reach the PTX."""
    shapes = [[64, 0, 4, 64, 1], [64, 1, 4, 32, 3], [64, 0, 8, 64, 3, 1], [64, 1, 4, 32, 3, 1], [64, 0, 8, 32, 1, 0, 2]]
    compiled = run_under("compiler", "helpers.lessons.attention.tensor_cores:compile_request",
                         {"shapes": shapes, "cc": [9, 0]})
    assert ".maxntid 256, 1, 1" in compiled[json.dumps(shapes[-1])]  # launch bounds: 256 threads,
    assert ".minnctapersm 2" in compiled[json.dumps(shapes[-1])]  # two blocks an SM
    for shape, products in zip(shapes, (128, 192, 384, 192, 64)):
        ptx = compiled[json.dumps(shape)]
        assert ptx.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == products
        assert ".local" not in ptx and "cvt.rna.tf32.f32" in ptx


UNFUSED_TF32_CASES = [(1, 20, 8, True)] if helpers.is_simulator() else [
    (2, length, d, causal) for length in (1, 77, 1000) for d in (16, 64, 128) for causal in (False, True)]


@pytest.mark.parametrize("heads, length, d, causal", UNFUSED_TF32_CASES)
def test_the_unfused_pipeline_on_tensor_cores_matches_float64(heads, length, d, causal):
    """S = Q K^T and O = P V as TF32 products, S and P through memory: within 2e-3 of the largest output."""
    q, k, v = inputs(heads, length, d, seed=0)
    s, p = at.unfused_buffers(heads, length)
    out = poisoned(heads * length * d).reshape(heads, length, d)
    tc.run_unfused_tensor_cores(*(cuda.to_device(a) for a in (q, k, v)), s, p, out, causal)
    got = out.copy_to_host()
    assert not np.isnan(got).any()
    assert relative_error(got, at.reference(q, k, v, causal)) < 2e-3


# --- bf16 tensor cores ------------------------------------------------------------------------------

BF16_CASES = [(1, 20, 16, False, (1, 16)), (1, 37, 32, True, (2, 16))] if helpers.is_simulator() else [
    (2, length, d, causal, (4, 64 if d <= 64 else 32)) for length in (1, 77, 1000) for d in (16, 32, 64, 128)
    for causal in (False, True)]


@pytest.mark.parametrize("heads, length, d, causal, shape", BF16_CASES)
def test_bf16_attention_matches_float64_to_bf16_precision(heads, length, d, causal, shape):
    """Inputs, P and the output in bf16 (8 significant bits), sums in float32: within 2e-2 of the largest output,
    as SDPA's flash kernel is held to; every output pair written."""
    q, k, v = inputs(heads, length, d, seed=0)
    out = cuda.to_device(np.full((heads, length, d // 2), 0x7FC07FC0, np.uint32))  # NaN in both halves
    bf16.run_bf16(*(cuda.to_device(bf16.to_bf16(a)) for a in (q, k, v)), out, causal, bf16.Bf16Config(*shape))
    got = bf16.from_bf16(out.copy_to_host())
    assert not np.isnan(got).any()
    assert relative_error(got, at.reference(q, k, v, causal)) < 2e-2


def test_bf16_pairs_round_to_nearest_even_and_come_back():
    x = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -2.5, 3e38], np.float32)  # two ties: to even, down and up
    words = bf16.to_bf16(x)
    assert words.dtype == np.uint32 and words.shape == (2,)
    assert bf16.from_bf16(words).tolist() == [1.0, 1 + 2.0 ** -6, -2.5, float(np.float32(bf16.from_bf16(words)[3]))]
    assert abs(bf16.from_bf16(words)[3] - 3e38) / 3e38 < 2.0 ** -8


def test_bf16_inputs_are_checked():
    q = cuda.to_device(np.zeros((1, 8, 8), np.uint32))
    with pytest.raises(TypeError, match="uint32"):
        bf16.run_bf16(cuda.to_device(np.zeros((1, 8, 16), np.float32)), q, q, cuda.device_array((1, 8, 8), np.uint32))
    k = cuda.to_device(np.zeros((1, 8, 8), np.uint32))
    with pytest.raises(ValueError, match="`out` and `k` are the same array"):
        bf16.run_bf16(q, k, cuda.to_device(np.zeros((1, 8, 8), np.uint32)), k)
    with pytest.raises(ValueError, match="multiples of 16"):
        bf16.bf16_kernel(24, bf16.Bf16Config(), False)


@pytest.mark.skipif(bool(COMPILER[0]), reason="the PTX is numba-cuda's")
def test_the_bf16_kernel_compiles_to_m16n8k16_mma_sync_and_8_byte_shared_reads():
    compiled = run_under("compiler", "helpers.lessons.attention.bf16:compile_request",
                         {"shapes": [[64, 0, 4, 64]], "cc": [9, 0]})
    ptx = compiled[json.dumps([64, 0, 4, 64])]
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 64  # 32 for Q K^T, 32 for P V
    assert ptx.count("ld.shared.v2") == 64 and "cvt.rn.bf16x2.f32" in ptx and ".local" not in ptx


@pytest.mark.parametrize("d", range(4, 132, 4))
def test_the_default_tiled_shape_fits_every_head_size_it_can_run(d):
    """Every multiple of 4 up to 128 (48 and 80 too, where the 64 x 32 shape's 8 lanes a row do not divide d)."""
    tiled.default_tiled_config(d).check(d)


def test_bf16_shapes_are_checked_when_made():
    with pytest.raises(ValueError, match="`block_k` must be"):
        bf16.Bf16Config(4, 0)
    with pytest.raises(ValueError, match="`warps` must be"):
        bf16.Bf16Config(33, 64)
