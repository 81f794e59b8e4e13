"""Exercise 2: no bounds guard."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"past the end.*bounds guard"


@cuda.jit
def normalize_kernel(x, mean, inv_std, gamma, beta, out):
    i = cuda.grid(1)
    out[i] = (x[i] - mean) * inv_std * gamma[i] + beta[i]


def normalize_fused(x, mean, inv_std, gamma, beta, out):
    normalize_kernel[blocks_for(out.size), BLOCK_SIZE](x, mean, inv_std, gamma, beta, out)
