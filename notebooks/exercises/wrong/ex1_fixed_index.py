"""Exercise 1: a size written into the kernel: past element 1024 it stores 0 instead of the result."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"the first 1024 elements of `out` are right, but from element 1024 on"


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        v = a * x[i] + y[i]
        out[i] = max(v, 0.0) if i < 1024 else 0.0


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)
