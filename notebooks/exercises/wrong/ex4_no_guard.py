"""Exercise 4: the dividing kernel has no bounds guard."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts.ex4 import block_max_abs_kernel  # the right piece; the mistake is below

EXPECTED = r"past the end.*bounds guard"


@cuda.jit
def divide_kernel(x, m, out):
    i = cuda.grid(1)
    out[i] = x[i] / m[0]


def normalize_by_max(x, out):
    m = cuda.device_array(1, dtype=x.dtype)
    block_max_abs_kernel[1, BLOCK_SIZE](x, m)
    divide_kernel[blocks_for(x.size), BLOCK_SIZE](x, m, out)
