"""Exercise 4: right values, but |x| goes through memory: three kernels."""
from numba import cuda, float32

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts.ex4 import divide_kernel, store_block_max  # the right pieces; the mistake is below

EXPECTED = r"you made 5 trips to memory in 3 launches .*, more than this computation needs"


@cuda.jit
def abs_kernel(x, t):
    i = cuda.grid(1)
    if i < t.size:
        t[i] = abs(x[i])


@cuda.jit
def max_kernel(t, m):
    best = float32(0.0)
    for j in range(cuda.grid(1), t.size, cuda.gridsize(1)):
        best = max(best, t[j])
    store_block_max(best, m)


def normalize_by_max(x, out):
    t = cuda.device_array_like(x)
    m = cuda.device_array(1, dtype=x.dtype)
    abs_kernel[blocks_for(x.size), BLOCK_SIZE](x, t)
    max_kernel[1, BLOCK_SIZE](t, m)
    divide_kernel[blocks_for(x.size), BLOCK_SIZE](x, m, out)
