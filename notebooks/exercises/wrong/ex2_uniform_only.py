"""Exercise 2: gamma[0] and beta[0] for every element. Right for uniform gamma and beta (a fresh layer: ones and zeros)."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"read gamma\[i\] and beta\[i\]"


@cuda.jit
def normalize_kernel(x, mean, inv_std, gamma, beta, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (x[i] - mean) * inv_std * gamma[0] + beta[0]


def normalize_fused(x, mean, inv_std, gamma, beta, out):
    normalize_kernel[blocks_for(out.size), BLOCK_SIZE](x, mean, inv_std, gamma, beta, out)
