"""The right pieces of exercise 4 that several wrong solutions share (the mistake is elsewhere).

Not a solution to hand out: students find the same pieces in the solution notebook.
"""
from numba import cuda, float32

from helpers.sizes import BLOCK_SIZE


@cuda.jit(device=True)
def pooled_max(best):
    """The largest of the block's per-thread values, for thread 0 (other threads get their own)."""
    pooled = cuda.shared.array(BLOCK_SIZE, float32)
    pooled[cuda.threadIdx.x] = best
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        for k in range(1, cuda.blockDim.x):
            best = max(best, pooled[k])
    return best


@cuda.jit
def max_abs_kernel(x, m):
    best = float32(0.0)
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        best = max(best, abs(x[j]))
    best = pooled_max(best)
    if cuda.threadIdx.x == 0:
        m[0] = best


@cuda.jit
def divide_kernel(x, m, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] / m[0]
