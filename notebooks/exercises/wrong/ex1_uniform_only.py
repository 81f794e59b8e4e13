"""Exercise 1: x and y swapped. Right for uniform inputs (x equal to y, e.g. all ones)."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"x and y are swapped"


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(a * y[i] + x[i], 0.0)


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)
