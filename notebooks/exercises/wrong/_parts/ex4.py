"""The right pieces of exercise 4 that several wrong solutions share (the mistake is elsewhere).

Not a solution to hand out: students find the same pieces in the solution notebook.
"""
from numba import cuda, float32

from helpers.sizes import BLOCK_SIZE


@cuda.jit(device=True)
def store_block_max(best, partial):
    """Thread 0 stores the largest of the block's per-thread values `best` in partial[blockIdx.x]."""
    pooled = cuda.shared.array(BLOCK_SIZE, float32)
    pooled[cuda.threadIdx.x] = best
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        for k in range(1, cuda.blockDim.x):
            best = max(best, pooled[k])
        partial[cuda.blockIdx.x] = best


@cuda.jit
def block_max_abs_kernel(x, partial):
    """partial[b] = the largest |x[j]| of the elements block b visits: launched as one block, partial[0] = max |x|."""
    best = float32(0.0)
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        best = max(best, abs(x[j]))
    store_block_max(best, partial)


@cuda.jit
def divide_kernel(x, m, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] / m[0]
