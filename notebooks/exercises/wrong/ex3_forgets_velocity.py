"""Exercise 3: computes the new velocity but never stores it."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"`velocity` was never updated"


@cuda.jit
def sgd_momentum_kernel(param, grad, velocity, lr, momentum, weight_decay):
    i = cuda.grid(1)
    if i < param.size:
        p = param[i]
        v = momentum * velocity[i] + grad[i] + weight_decay * p
        param[i] = p - lr * v


def sgd_momentum_step(param, grad, velocity, lr, momentum, weight_decay):
    sgd_momentum_kernel[blocks_for(param.size), BLOCK_SIZE](param, grad, velocity, lr, momentum, weight_decay)
