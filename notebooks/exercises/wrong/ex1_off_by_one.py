"""Exercise 1: a guard with `<=`, one element too far."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"past the end.*(`<`, not `<=`|bounds guard)"


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i <= out.size:
        out[i] = max(a * x[i] + y[i], 0.0)


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)
