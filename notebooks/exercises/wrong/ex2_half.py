"""Exercise 2: launches half the blocks it needs (at least one), so the tail is never written."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"of `out` was never written.*grid covers every element"


@cuda.jit
def normalize_kernel(x, mean, inv_std, gamma, beta, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (x[i] - mean) * inv_std * gamma[i] + beta[i]


def normalize_fused(x, mean, inv_std, gamma, beta, out):
    normalize_kernel[max(1, blocks_for(out.size) // 2), BLOCK_SIZE](x, mean, inv_std, gamma, beta, out)
