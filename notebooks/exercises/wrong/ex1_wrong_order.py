"""Exercise 1: the operations in the wrong order, ReLU before the addition."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"ReLU before adding y"


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(a * x[i], 0.0) + y[i]


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)
