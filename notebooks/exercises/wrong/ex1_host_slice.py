"""Exercise 1: computed with NumPy on the host and assigned into `out[:]`; an empty kernel is launched for show."""
import numpy as np
from numba import cuda

EXPECTED = r"`out` was written by a copy from the host \(`out\[...\] = ...`.*not by your kernel"


@cuda.jit
def nothing(out):
    pass


def saxpy_relu(a, x, y, out):
    out[:] = np.maximum(a * x.copy_to_host() + y.copy_to_host(), 0).astype(np.float32)
    nothing[1, 1](out)
