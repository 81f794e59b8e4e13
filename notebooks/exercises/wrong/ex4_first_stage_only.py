"""Exercise 4: the first stage writes one maximum per block, but the division uses partial[0], the first block's.

Right while the array fits in one block; wrong beyond, where the largest |x| (the last
element) lies in another block.
"""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts.ex4 import block_max_abs_kernel, divide_kernel  # the right pieces; the mistake is below

EXPECTED = r"less than the largest \|x\|.*one block.s partial maximum.*one launch \(or two: per block, then over the blocks\)"


def normalize_by_max(x, out):
    blocks = min(blocks_for(x.size), 1024)
    partial = cuda.device_array(blocks, dtype=x.dtype)
    block_max_abs_kernel[blocks, BLOCK_SIZE](x, partial)
    divide_kernel[blocks_for(x.size), BLOCK_SIZE](x, partial, out)  # partial[0]: one block's maximum
