import numpy as np
import pytest
from numba import cuda

from helpers import checks, pipeline
from helpers.checks import CheckFailed
from helpers.sizes import BLOCK_SIZE, blocks_for


@pytest.mark.parametrize("n", [1, 255, 257, 700])
def test_both_pipelines_match_numpy_bitwise(n):
    host = checks.random_inputs(n)
    a, b, c = (cuda.to_device(x) for x in host)
    t1, t2, out3, out1 = (checks.poisoned(n) for _ in range(4))
    s = 1.7
    pipeline.run_three_kernels(a, b, c, s, t1, t2, out3)
    pipeline.run_fused(a, b, c, s, out1)
    expected = pipeline.reference(*host, s)
    checks.check_close(out3, expected)
    checks.check_close(out1, expected)
    # Same IEEE operations in the same order: the results are identical, bit for bit.
    assert np.array_equal(out3.copy_to_host(), out1.copy_to_host())
    assert np.array_equal(out1.copy_to_host(), expected)


def test_inputs_are_fresh_and_not_uniform():
    first, second = checks.random_inputs(100, count=2)
    assert not np.array_equal(first, second)
    assert first.std() > 0.1


@cuda.jit
def half_written(x, out):
    i = cuda.grid(1)
    if i < out.size // 2:
        out[i] = x[i]


def test_poison_catches_unwritten_elements():
    n = 300
    x = cuda.to_device(checks.random_inputs(n, count=1)[0])
    out = checks.poisoned(n)
    half_written[blocks_for(n), BLOCK_SIZE](x, out)
    with pytest.raises(CheckFailed, match=r"element 150 of `out` was never written \(150 of 300"):
        checks.check_close(out, x.copy_to_host())


def test_wrong_values_are_reported_by_index():
    n = 50
    x = checks.random_inputs(n, count=1)[0]
    wrong = x.copy()
    wrong[7] += 1
    with pytest.raises(CheckFailed, match="element 7 of `out` is"):
        checks.check_close(cuda.to_device(wrong), x)


def test_bad_input_reaches_the_learner():
    a = cuda.to_device(np.ones(10, np.float32))
    with pytest.raises(TypeError, match="`b` is a host NumPy array"):
        pipeline.run_fused(a, np.ones(10, np.float32), a, 1.0, a)
    with pytest.raises(ValueError, match="different lengths"):
        pipeline.run_fused(a, a, cuda.to_device(np.ones(9, np.float32)), 1.0, a)
