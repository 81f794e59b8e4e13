"""The three softmax kernels: correct against float64 NumPy, counted by the ledger, bad input refused."""

import numpy as np
import pytest
from numba import cuda

from helpers import softmax as sm
from helpers.checks import poisoned
from helpers.lab import reductions


def random_matrix(rows, cols):
    return (np.random.default_rng().standard_normal((rows, cols)) * 3).astype(np.float32)


def poisoned_matrix(rows, cols):
    return poisoned(rows * cols).reshape(rows, cols)


@pytest.mark.parametrize("rows, cols", [(8, 37), (3, 70), (2, 5)])
@pytest.mark.parametrize("version", ["unfused", "fused", "online"])
def test_softmax_matches_float64(version, rows, cols):
    x = random_matrix(rows, cols)
    dx, out = cuda.to_device(x), poisoned_matrix(rows, cols)
    if version == "unfused":
        sm.run_unfused(dx, poisoned(rows), poisoned_matrix(rows, cols), poisoned(rows), out)
    elif version == "fused":
        sm.run_fused(dx, out)
    else:
        sm.run_online(dx, out)
    got = out.copy_to_host()
    assert not np.isnan(got).any()
    assert np.max(np.abs(got - sm.reference(x)) / sm.reference(x)) < 1e-5


def test_online_equals_two_pass_within_rounding():
    x = random_matrix(6, 45)
    dx, a, b = cuda.to_device(x), poisoned_matrix(6, 45), poisoned_matrix(6, 45)
    sm.run_fused(dx, a)
    sm.run_online(dx, b)
    assert np.allclose(a.copy_to_host(), b.copy_to_host(), rtol=1e-6, atol=0)


def test_large_values_do_not_overflow():
    x = random_matrix(2, 40) + np.float32(1000)  # exp(1000) overflows float32; subtracting the max saves it
    dx, out = cuda.to_device(x), poisoned_matrix(2, 40)
    sm.run_online(dx, out)
    assert np.allclose(out.copy_to_host(), sm.reference(x), rtol=1e-5)


def test_counts():
    unfused, fused, online = sm.count_in_simulator(sm.count_ledgers, rows=4, cols=37)
    assert (unfused.launches, unfused.trips) == (4, 8)
    n = 4 * 37
    # x read twice, e written once and read twice, out written once; plus the per-row max and sum
    assert unfused.bytes_moved == 4 * (2 * n + 3 * n + n) + 4 * 4 * 4
    assert unfused.round_trips == ["row_max", "e", "row_sum"]
    for one in (fused, online):
        assert (one.launches, one.trips, one.bytes_per_element) == (1, 2, 8)
        assert one.round_trips == []


def test_error_detects_unwritten_rows():
    x = random_matrix(4, 37)
    got = sm.reference(x).astype(np.float32)
    got[3, 5] = np.nan
    assert reductions.softmax_error(got, x, np.arange(4)) == np.inf


def test_bad_input_is_refused():
    with pytest.raises(TypeError, match="float32"):
        sm.run_fused(cuda.to_device(np.zeros((2, 3))), poisoned_matrix(2, 3))
    with pytest.raises(ValueError, match="shape"):
        sm.run_fused(cuda.to_device(random_matrix(2, 3)), poisoned_matrix(3, 2))
    with pytest.raises(ValueError, match="2-D"):
        sm.run_online(poisoned(6), poisoned(6))
    with pytest.raises(ValueError, match="too long"):
        sm.rows_kernel(10_000, 32)
    with pytest.raises(ValueError, match="multiple of 32"):
        sm.rows_kernel(100, 48)
