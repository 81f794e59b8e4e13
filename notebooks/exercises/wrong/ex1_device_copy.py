"""Exercise 1: a fused kernel writes a scratch array, then a device-to-device copy moves it into `out`.

The copy reads and writes every element once more: 4 trips and 20 bytes per element, not 2 and 12.
"""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts.ex1 import saxpy_relu_kernel  # the right kernel; the mistake is the copy after it

EXPECTED = r"`out` was written by a copy from another device array \(`out.copy_to_device\(...\)`"


def saxpy_relu(a, x, y, out):
    tmp = cuda.device_array_like(out)
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, tmp)
    out.copy_to_device(tmp)
