import numpy as np
import pytest
from numba import cuda

from helpers.validate import check_elementwise, require_device_array


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
