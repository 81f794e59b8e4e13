"""Exercise 5: param, m and v are copied to scratch arrays on the device, updated there, and copied back.

Six hidden copies of n elements: 76 bytes per element, not 28.
"""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts.ex5 import adamw_kernel  # the right kernel; the mistake is the copies around it

EXPECTED = r"copy (from|to) another device array"


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    scratch = [cuda.device_array_like(a) for a in (param, m, v)]
    for copy, original in zip(scratch, (param, m, v)):
        copy.copy_to_device(original)
    p2, m2, v2 = scratch
    adamw_kernel[blocks_for(param.size), BLOCK_SIZE](
        p2, grad, m2, v2, lr, beta1, beta2, eps, weight_decay, 1 - beta1**step, 1 - beta2**step
    )
    param.copy_to_device(p2)
    m.copy_to_device(m2)
    v.copy_to_device(v2)
