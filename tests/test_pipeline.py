import re

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


# --- bad input: a message naming the problem, never a silently wrong answer -------------------


def device_inputs(n=300, dtype=np.float32):
    return [cuda.to_device(x) for x in checks.random_inputs(n, dtype=dtype)]


@pytest.mark.parametrize("s, error, message", [
    (None, TypeError, "`s` must be a number .*got None"),
    ("2", TypeError, "`s` must be a number .*got str"),
    (True, TypeError, "`s` must be a number .*got bool"),
    (float("nan"), ValueError, "`s` is nan"),
    (float("inf"), ValueError, "`s` is inf"),
    (0, ValueError, "`s` is 0: dividing by it"),
    # finite and non-zero as Python floats, but not in float32, the dtype the kernels divide in
    (1e39, ValueError, "`s` is 1e\\+39, beyond the largest float32 .*it becomes inf"),
    (-1e39, ValueError, "`s` is -1e\\+39, beyond the largest float32 .*it becomes -inf"),
    (1e-46, ValueError, "`s` is 1e-46, closer to 0 than the smallest float32 .*it becomes 0"),
    (np.float64(1e-46), ValueError, "`s` is 1e-46, closer to 0"),
])
def test_a_bad_scale_is_named_before_anything_runs(s, error, message):
    a, b, c = device_inputs()
    out, t1, t2 = checks.poisoned(300), checks.poisoned(300), checks.poisoned(300)
    with pytest.raises(error, match=message):
        pipeline.run_fused(a, b, c, s, out)
    with pytest.raises(error, match=message):
        pipeline.run_three_kernels(a, b, c, s, t1, t2, out)
    assert np.isnan(out.copy_to_host()).all()  # nothing was launched


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_inputs_are_refused_naming_the_dtype(dtype):
    host = [np.array([1, 2, 3], dtype=dtype)] * 3
    a, b, c = (cuda.to_device(x) for x in host)
    out = cuda.to_device(np.zeros(3, dtype=dtype))
    with pytest.raises(TypeError, match=f"`a` is {np.dtype(dtype)}: .*truncate"):
        pipeline.run_fused(a, b, c, 2.5, out)


def test_integer_output_alone_is_refused():
    a, b, c = device_inputs(3)
    with pytest.raises(TypeError, match="`out` is int32"):
        pipeline.run_fused(a, b, c, 2.5, cuda.to_device(np.zeros(3, np.int32)))


def test_mixed_float_dtypes_are_refused():
    a, b, _ = device_inputs(10)
    c64 = cuda.to_device(np.ones(10, np.float64))
    with pytest.raises(TypeError, match="c: float64"):
        pipeline.run_fused(a, b, c64, 1.0, checks.poisoned(10))


@pytest.mark.parametrize("alias", ["a", "b", "c"])
def test_an_output_that_is_an_input_is_refused_naming_both(alias):
    a, b, c = device_inputs()
    inputs = {"a": a, "b": b, "c": c}
    before = inputs[alias].copy_to_host()
    t2, out = checks.poisoned(300), checks.poisoned(300)
    with pytest.raises(ValueError, match=f"`t1` and `{alias}` are the same array"):
        pipeline.run_three_kernels(a, b, c, 2.0, inputs[alias], t2, out)
    with pytest.raises(ValueError, match=f"`out` and `{alias}` are the same array"):
        pipeline.run_fused(a, b, c, 2.0, inputs[alias])
    assert np.array_equal(inputs[alias].copy_to_host(), before)  # the input survived


def test_overlapping_views_are_refused():
    whole = checks.poisoned(301)
    a, b, c = device_inputs(300)
    with pytest.raises(ValueError, match="`out` overlaps `a`"):
        pipeline.run_fused(whole[:300], b, c, 2.0, whole[1:])


def test_intermediates_may_share_memory_with_each_other():
    # t1, t2 and out are all outputs: reusing one buffer is correct elementwise, and allowed
    host = checks.random_inputs(300)
    a, b, c = (cuda.to_device(x) for x in host)
    shared = checks.poisoned(300)
    pipeline.run_three_kernels(a, b, c, 2.0, shared, shared, shared)
    checks.check_close(shared, pipeline.reference(*host, 2.0))


def test_host_arrays_and_other_objects_are_refused_by_both_launchers():
    a, b, c = device_inputs(10)
    out = checks.poisoned(10)
    with pytest.raises(TypeError, match="`c` is a host NumPy array"):
        pipeline.run_three_kernels(a, b, np.ones(10, np.float32), 1.0, checks.poisoned(10), checks.poisoned(10), out)
    with pytest.raises(TypeError, match="`out` must be a device array, got list"):
        pipeline.run_fused(a, b, c, 1.0, [0.0] * 10)


# --- the helpers' own inputs ---------------------------------------------------------------


@pytest.mark.parametrize("args, error, message", [
    ((2.5,), TypeError, r"n must be a whole number of elements, got 2.5 \(float\).*int\(2.5\)"),
    (("300",), TypeError, "n must be a whole number of elements"),
    ((0,), ValueError, "n must be positive .*n = 0"),
    ((-5,), ValueError, "n = -5"),
    ((300, 0), ValueError, "block_size must be between 1 and 1024 threads.*got 0"),
    ((300, 2048), ValueError, "block_size must be between 1 and 1024"),
    ((300, 128.0), TypeError, "block_size must be a whole number of threads"),
])
def test_blocks_for_says_what_to_fix(args, error, message):
    with pytest.raises(error, match=message):
        blocks_for(*args)


def test_blocks_for_accepts_numpy_integers():
    assert blocks_for(np.int64(257)) == 2
    assert blocks_for(257, np.int32(128)) == 3
    assert blocks_for(1, 1) == 1


def test_inputs_and_poisoned_outputs_need_a_positive_length():
    with pytest.raises(ValueError, match="n = 0"):
        checks.random_inputs(0)
    with pytest.raises(TypeError, match="whole number"):
        checks.random_inputs(10.0)
    with pytest.raises(ValueError, match="n = 0"):
        checks.poisoned(0)


def test_poison_needs_a_float_array():
    with pytest.raises(TypeError, match="floating-point dtype.*int32"):
        checks.poisoned(10, np.int32)
    with pytest.raises(TypeError, match="floating-point array.*int32"):
        checks.poison(cuda.to_device(np.zeros(10, np.int32)))


@pytest.mark.parametrize("got_shape", [(1,), (2, 5), (10, 1), (9,)])
def test_check_close_refuses_a_result_of_another_shape(got_shape):
    # (1,) and (10, 1) would broadcast against (10,) and pass element by element without the shape check
    expected = np.full(10, 1.5, np.float32)
    with pytest.raises(CheckFailed, match=re.escape(f"`out` has shape {got_shape}, expected (10,)")):
        checks.check_close(np.full(got_shape, 1.5, np.float32), expected)


def test_check_close_names_a_missing_result_and_takes_a_plain_list_as_expected():
    with pytest.raises(CheckFailed, match="`out` is None: pass the output array"):
        checks.check_close(None, np.ones(3, np.float32))
    checks.check_close(np.array([1.0, 2.0], np.float32), [1.0, 2.0])


def test_a_scale_that_float32_cannot_hold_is_fine_in_float64():
    host = checks.random_inputs(50, dtype=np.float64)
    a, b, c = (cuda.to_device(x) for x in host)
    for s in (1e39, 1e-46):
        out = checks.poisoned(50, np.float64)
        pipeline.run_fused(a, b, c, s, out)
        checks.check_close(out, pipeline.reference(*host, s))
    assert pipeline.scalar_for("s", 1e-40, np.float32, nonzero=True) == np.float32(1e-40)  # a subnormal, not 0
    assert pipeline.scalar_for("k", 0, np.float32) == 0  # zero is refused only where it divides


@pytest.mark.parametrize("kwargs, error, message", [
    ({"dtype": np.int32}, TypeError, "draws floating-point values, got dtype int32.*integers"),
    ({"dtype": np.uint8}, TypeError, "got dtype uint8"),
    ({"dtype": np.complex64}, TypeError, "got dtype complex64"),
    ({"low": 2, "high": 1}, ValueError, "low must be below high, got low = 2, high = 1"),
    ({"low": 1.0, "high": 1.0}, ValueError, "low must be below high.*uniform inputs"),
    ({"high": float("inf")}, ValueError, "high must be a finite number, got inf"),
    ({"low": None}, ValueError, "low must be a finite number, got None"),
    ({"count": 2.5}, ValueError, "count must be a whole number >= 1 .*got 2.5"),
    ({"count": 0}, ValueError, "count must be a whole number >= 1 .*got 0"),
])
def test_random_inputs_refuse_what_would_make_degenerate_data(kwargs, error, message):
    with pytest.raises(error, match=message):
        checks.random_inputs(10, **kwargs)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_random_inputs_stay_inside_the_bounds_in_every_float_dtype(dtype):
    (x,) = checks.random_inputs(1000, 1, dtype=dtype, low=-3, high=5)
    assert x.dtype == dtype and x.min() >= -3 and x.max() <= 5 and x.std() > 1
