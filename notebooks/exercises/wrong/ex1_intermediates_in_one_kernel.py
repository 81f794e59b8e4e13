"""Exercise 1: one kernel, but it still stores both intermediates, `t1 = a * x` and `t2 = t1 + y`, in arrays.

2 trips (one read, one write), yet 20 bytes per element: x and y read, t1, t2 and out written.
"""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"your kernel moves 20 bytes per element; 12 are enough"


@cuda.jit
def saxpy_relu_kernel(a, x, y, t1, t2, out):
    i = cuda.grid(1)
    if i < out.size:
        t1[i] = a * x[i]
        t2[i] = t1[i] + y[i]
        out[i] = max(t2[i], 0.0)


def saxpy_relu(a, x, y, out):
    t1, t2 = cuda.device_array_like(out), cuda.device_array_like(out)
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, t1, t2, out)
