"""Exercise 1: one kernel, but x and y are read twice (once for the test, once for the value)."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"moves [0-9.]+ bytes per element; 12 are enough"
SIMULATOR_ONLY = True  # on a GPU the compiler loads each element once anyway


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        if a * x[i] + y[i] > 0:
            out[i] = a * x[i] + y[i]
        else:
            out[i] = 0.0


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)
