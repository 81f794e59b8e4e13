"""Exercise 1: the right kernel launched on a grid written into the code, `[4, 256]`.

1024 threads cover every n up to 1024 and no more: past it, elements are never written.
"""
from _parts.ex1 import saxpy_relu_kernel  # the right kernel; the mistake is its launch

EXPECTED = r"launched with 1024 threads \(4 blocks of 256\) at every size, so at n = \d+ its grid does not cover n"


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[4, 256](a, x, y, out)
