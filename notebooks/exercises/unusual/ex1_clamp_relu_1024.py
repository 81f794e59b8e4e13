"""Exercise 1 with the ReLU as a clamp (`if v < 0: v = 0.0`, one store), 1024 threads per block, guarded on
`x.shape[0]`."""
from numba import cuda

from helpers.sizes import blocks_for


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = a * x[i] + y[i]
        if v < 0:
            v = 0.0
        out[i] = v


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[blocks_for(x.shape[0], 1024), 1024](a, x, y, out)
