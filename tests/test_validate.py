import numpy as np
import pytest
from numba import cuda

from helpers.validate import check_elementwise, check_no_aliasing, memory_range, require_device_array, require_scalar


def device(n=10, dtype=np.float32):
    return cuda.to_device(np.arange(n, dtype=dtype) + 1)


def test_accepts_matching_device_arrays_and_returns_n():
    assert check_elementwise({"a": device(), "b": device()}) == 10


def test_host_array_is_named():
    with pytest.raises(TypeError, match=r"`b` is a host NumPy array.*cuda.to_device\(b\)"):
        check_elementwise({"a": device(), "b": np.ones(10, np.float32)})


def test_other_objects_are_rejected():
    with pytest.raises(TypeError, match="`a` must be a device array, got list"):
        require_device_array("a", [1.0, 2.0])


def test_mismatched_lengths_are_listed():
    with pytest.raises(ValueError, match="a: 10, b: 11"):
        check_elementwise({"a": device(10), "b": device(11)})


def test_mismatched_dtypes_are_named():
    with pytest.raises(TypeError, match="b: float64"):
        check_elementwise({"a": device(), "b": device(dtype=np.float64)})


def test_required_dtype():
    with pytest.raises(TypeError, match="expected every array to be float32"):
        check_elementwise({"a": device(dtype=np.float64)}, dtype=np.float32)


def test_non_contiguous_view_is_named():
    with pytest.raises(ValueError, match="`b` is not contiguous"):
        check_elementwise({"a": device(5), "b": device(10)[::2]})


def test_empty_arrays():
    with pytest.raises(ValueError, match="n = 0"):
        check_elementwise({"a": cuda.device_array(0, np.float32)})


def test_two_dimensional_arrays():
    with pytest.raises(ValueError, match="1-D"):
        check_elementwise({"a": cuda.to_device(np.ones((2, 3), np.float32))})


def test_integer_dtypes_are_refused_unless_asked_for():
    ints = {"a": device(dtype=np.int32), "b": device(dtype=np.int32)}
    with pytest.raises(TypeError, match="`a` is int32: these kernels compute in floating point"):
        check_elementwise(ints)
    assert check_elementwise(ints, floating=False) == 10


def test_float16_and_float64_are_floating_point():
    assert check_elementwise({"a": device(dtype=np.float16)}) == 10
    assert check_elementwise({"a": device(dtype=np.float64)}) == 10


def test_an_output_aliasing_an_input_is_named():
    a = device()
    with pytest.raises(ValueError, match="`out` and `a` are the same array"):
        check_elementwise({"a": a, "out": a}, outputs=("out",))
    assert check_elementwise({"a": a, "out": a}) == 10  # without outputs named, no aliasing check


def test_exact_in_place_is_allowed_only_when_asked():
    x = device()
    with pytest.raises(ValueError, match="same array"):
        check_no_aliasing({"x": x}, {"out": x})
    check_no_aliasing({"x": x}, {"out": x}, in_place=True)
    whole = device(11)
    with pytest.raises(ValueError, match="`out` overlaps `x`"):
        check_no_aliasing({"x": whole[:10]}, {"out": whole[1:]}, in_place=True)


def test_disjoint_views_of_one_array_are_fine():
    whole = device(20)
    check_no_aliasing({"x": whole[:10]}, {"out": whole[10:]})


def test_memory_range_covers_the_elements():
    start, end = memory_range("x", device(10))
    assert end - start == 40
    with pytest.raises(TypeError, match="`x` exposes no array interface"):
        memory_range("x", object())


@pytest.mark.parametrize("value, error, message", [
    (None, TypeError, "`k` must be a number .*got None"),
    (np.ones(3), TypeError, "got ndarray"),
    (np.bool_(True), TypeError, "got bool"),
    (complex(1, 2), TypeError, "got complex"),
    (float("-inf"), ValueError, "`k` is -inf"),
])
def test_scalars_must_be_finite_numbers(value, error, message):
    with pytest.raises(error, match=message):
        require_scalar("k", value)


def test_scalars_of_every_numeric_kind_are_accepted():
    assert require_scalar("k", 2) == 2.0
    assert require_scalar("k", np.float32(1.5)) == 1.5
    assert require_scalar("k", np.int64(-3)) == -3.0
    assert require_scalar("k", 0) == 0.0
    with pytest.raises(ValueError, match="`k` is 0"):
        require_scalar("k", 0.0, nonzero=True)
