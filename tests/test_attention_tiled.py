"""The register-tiled fused attention: float64 answers at awkward shapes, its counts, its refusals, its PTX."""

import json

import numpy as np
import pytest
from numba import cuda

from helpers.backend import COMPILER
from helpers.checks import poisoned
from helpers.counting.other_backend import run_under
from helpers.ledger import Ledger
from helpers.lessons.attention import kernels as at
from helpers.lessons.attention import tiled


def inputs(heads, length, d, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((heads, length, d)).astype(np.float32) for _ in range(3)]


def relative_error(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


@pytest.mark.parametrize("heads, length, d, causal, shape", [
    (2, 77, 16, False, None),  # 77 rows and keys: no multiple of any tile
    (1, 77, 16, True, None),
    (1, 1, 32, True, None),  # one row: one key, its own
    (1, 1, 32, False, None),
    (1, 33, 64, True, (32, 16, 2, 2)),
    (1, 20, 128, False, None),
])
def test_tiled_matches_float64(heads, length, d, causal, shape):
    q, k, v = inputs(heads, length, d)
    out = poisoned(heads * length * d).reshape(heads, length, d)
    config = tiled.TiledConfig(*shape) if shape else None
    tiled.run_tiled(*(cuda.to_device(a) for a in (q, k, v)), out, causal=causal, config=config)
    got = out.copy_to_host()
    assert not np.isnan(got).any(), "a poisoned output element was never written"
    assert relative_error(got, at.reference(q, k, v, causal)) < 1e-5


def test_the_output_may_be_q_but_not_k_or_v():
    q, k, v = (cuda.to_device(a) for a in inputs(1, 40, 16))
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
    assert tiled.attention_flops(1, 4, 8, causal=True) == 4 * 8 * (1 + 2 + 3 + 4)
    assert tiled.attention_flops(2, 4096, 64, causal=False) == 4 * 64 * 2 * 4096 ** 2
    half = tiled.attention_flops(1, 4096, 64, True) / tiled.attention_flops(1, 4096, 64, False)
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
    q, k, v = (cuda.to_device(a) for a in inputs(1, 8, 16))
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
