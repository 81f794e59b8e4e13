"""Exercise 1: the values are computed with NumPy on the host, uploaded, and a device copy kernel moves them into `out`.

The copy kernel alone makes 2 trips and moves 8 bytes per element, inside the budget: only
watching the host copies tells this apart from a fused kernel.
"""
import numpy as np
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"`out` was not written by your kernel from the inputs: your function copied \d+ elements from the host"


@cuda.jit
def copy_kernel(source, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = source[i]


def saxpy_relu(a, x, y, out):
    result = cuda.to_device(np.maximum(a * x.copy_to_host() + y.copy_to_host(), 0).astype(np.float32))
    copy_kernel[blocks_for(out.size), BLOCK_SIZE](result, out)
