"""The right kernel of exercise 1, for the fixtures whose mistake (or unusual form) is in how it is launched.

Not a solution to hand out: students find the same kernel in the solution notebook.
"""
from numba import cuda


@cuda.jit
def saxpy_relu_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(a * x[i] + y[i], 0.0)
