"""Exercise 4: the maximum of x, not of |x|. Right when every value is positive."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts.ex4 import divide_kernel, store_block_max  # the right pieces; the mistake is below

EXPECTED = r"x / max\(x\)"


@cuda.jit
def max_kernel(x, m):
    best = x[0]
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        best = max(best, x[j])
    store_block_max(best, m)


def normalize_by_max(x, out):
    m = cuda.device_array(1, dtype=x.dtype)
    max_kernel[1, BLOCK_SIZE](x, m)
    divide_kernel[blocks_for(x.size), BLOCK_SIZE](x, m, out)
