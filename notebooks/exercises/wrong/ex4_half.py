"""Exercise 4: the dividing launch has half the blocks it needs (at least one)."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts.ex4 import block_max_abs_kernel, divide_kernel  # the right pieces; the mistake is below

EXPECTED = r"of `out` was never written.*grid covers every element"


def normalize_by_max(x, out):
    m = cuda.device_array(1, dtype=x.dtype)
    block_max_abs_kernel[1, BLOCK_SIZE](x, m)
    divide_kernel[max(1, blocks_for(x.size) // 2), BLOCK_SIZE](x, m, out)
