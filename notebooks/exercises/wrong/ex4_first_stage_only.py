"""Exercise 4: the first stage writes one maximum per block, but the division uses partial[0], the first block's.

Right while the array fits in one block; wrong beyond, where the largest |x| (the last
element) lies in another block.
"""
from numba import cuda, float32

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts import divide_kernel  # the right piece; the mistake is below

EXPECTED = r"less than the largest \|x\|.*one block.s partial maximum.*one launch \(or two: per block, then over the blocks\)"


@cuda.jit
def block_max_abs_kernel(x, partial):
    best = float32(0.0)
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        best = max(best, abs(x[j]))
    pooled = cuda.shared.array(BLOCK_SIZE, float32)
    pooled[cuda.threadIdx.x] = best
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        for k in range(1, cuda.blockDim.x):
            best = max(best, pooled[k])
        partial[cuda.blockIdx.x] = best


def normalize_by_max(x, out):
    blocks = min(blocks_for(x.size), 1024)
    partial = cuda.device_array(blocks, dtype=x.dtype)
    block_max_abs_kernel[blocks, BLOCK_SIZE](x, partial)
    divide_kernel[blocks_for(x.size), BLOCK_SIZE](x, partial, out)  # partial[0]: one block's maximum
