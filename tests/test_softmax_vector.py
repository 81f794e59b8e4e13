"""The 16-byte softmax: float64 answers at awkward shapes, rows past the end, refusals by rule, its PTX."""

import json

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers.backend import COMPILER
from helpers.checks import poisoned
from helpers.counting.other_backend import run_under
from helpers.ledger import Ledger
from helpers.lessons.softmax import kernels as sk
from helpers.lessons.softmax import vector as sv

CASES = [(7, 36, None), (5, 1000, (16, 4)), (3, 2052, None), (9, 64, (4, 8)), (2, 512, (64, 1)), (1, 4, None)]
if not helpers.is_simulator():
    CASES += [(4097, 4096, (128, 1)), (1001, 4096, (64, 4)), (333, 1024, (32, 8)), (77, 8192, None)]


@pytest.mark.parametrize("rows, cols, shape", CASES)
def test_vector_softmax_matches_float64(rows, cols, shape):
    """Rows that do not fill the last block, lanes left over at a row's end, and one-row matrices."""
    x = (np.random.default_rng(rows).standard_normal((rows, cols)) * 4).astype(np.float32)
    out = poisoned(rows * cols).reshape(rows, cols)
    sv.run_vector(cuda.to_device(x), out, sv.VectorConfig(*shape) if shape else None)
    got = out.copy_to_host()
    assert not np.isnan(got).any(), "a poisoned output element was never written"
    assert np.max(np.abs(got - sk.reference(x))) < 1e-6


def test_the_output_may_be_the_input():
    x = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    dx = cuda.to_device(x)
    sv.run_vector(dx, dx)
    assert np.max(np.abs(dx.copy_to_host() - sk.reference(x))) < 1e-6


def test_the_ledger_counts_one_read_and_one_write():
    [ledger] = Ledger.counted_in_simulator(sv.count_vector, rows=5, cols=36)
    assert ledger.bytes_by_array() == {"x": 4 * 5 * 36, "out": 4 * 5 * 36} and ledger.trips == 2


@pytest.mark.parametrize("shape, cols, words", [
    ((48, 1), 64, "power of two"),
    ((16, 1), 64, "whole warps"),
    ((32, 4), 38, "multiple of 4"),
    ((32, 1), 4096, "use more lanes"),
])
def test_a_shape_the_kernel_cannot_run_is_refused_by_its_rule(shape, cols, words):
    with pytest.raises(ValueError, match=words):
        sv.vector_kernel(cols, sv.VectorConfig(*shape))


@pytest.mark.skipif(bool(COMPILER[0]), reason="the PTX is numba-cuda's")
def test_every_access_is_16_bytes_and_the_row_stays_in_registers():
    compiled = run_under("compiler", "helpers.lessons.softmax.vector:compile_request",
                         {"shapes": [[1024, 32, 4], [4096, 128, 1]], "cc": [9, 0]})
    for key, ptx in compiled.items():
        assert ".local" not in ptx, key
        assert "ld.global.f32" not in ptx and "st.global.f32" not in ptx, key
        assert ptx.count("ld.global.v4.f32") == ptx.count("st.global.v4.f32") == 8, key
