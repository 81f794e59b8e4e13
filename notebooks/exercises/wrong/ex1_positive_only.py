"""Exercise 1: no ReLU. Right whenever a * x + y >= 0, e.g. for inputs drawn from [0.5, 2)."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"apply the ReLU"


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)
