"""Exercise 1: the right kernel launched on a grid written into the code, `[4, 256]`.

1024 threads cover every n up to 1024 and no more: past it, elements are never written.
"""
from numba import cuda

EXPECTED = r"launched with 1024 threads \(4 blocks of 256\) at every size, so at n = \d+ its grid does not cover n"


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(a * x[i] + y[i], 0.0)


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[4, 256](a, x, y, out)
