"""Exercise 1 with a grid-stride loop on a fixed grid of 2 blocks of 128 threads: it covers any n."""
from numba import cuda


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = max(a * x[i] + y[i], 0.0)


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[2, 128](a, x, y, out)
