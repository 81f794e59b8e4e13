"""Exercise 2: right values, but two kernels (scale and shift apart)."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"you made 4 trips to memory in 2 launches .*, more than this computation needs"


@cuda.jit
def standardize(x, mean, inv_std, t):
    i = cuda.grid(1)
    if i < t.size:
        t[i] = (x[i] - mean) * inv_std


@cuda.jit
def affine(t, gamma, beta, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = t[i] * gamma[i] + beta[i]


def normalize_fused(x, mean, inv_std, gamma, beta, out):
    t = cuda.device_array_like(x)
    blocks = blocks_for(out.size)
    standardize[blocks, BLOCK_SIZE](x, mean, inv_std, t)
    affine[blocks, BLOCK_SIZE](t, gamma, beta, out)
