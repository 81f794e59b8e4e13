"""Exercise 1: the values are computed with NumPy on the host and copied into `out`; an empty kernel is launched for show."""
import numpy as np
from numba import cuda

EXPECTED = r"`out` was written by a copy from the host \(`out.copy_to_device\(...\)`.*not by your kernel"


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    pass


def saxpy_relu(a, x, y, out):
    result = np.maximum(a * x.copy_to_host() + y.copy_to_host(), 0).astype(np.float32)
    out.copy_to_device(result)
    saxpy_relu_kernel[1, 1](a, x, y, out)
