"""Exercise 3: updates only the first half of the arrays."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

from _parts.ex3 import sgd_momentum_element  # the right update; the mistake is the guard below

EXPECTED = r"`param` was never updated.*check your bounds guard"


@cuda.jit
def sgd_momentum_kernel(param, grad, velocity, lr, momentum, weight_decay):
    i = cuda.grid(1)
    if i < param.size // 2:
        sgd_momentum_element(i, param, grad, velocity, lr, momentum, weight_decay)


def sgd_momentum_step(param, grad, velocity, lr, momentum, weight_decay):
    sgd_momentum_kernel[blocks_for(param.size), BLOCK_SIZE](param, grad, velocity, lr, momentum, weight_decay)
