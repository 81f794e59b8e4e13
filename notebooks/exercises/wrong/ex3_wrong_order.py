"""Exercise 3: param is stepped with the old velocity, before the velocity is updated."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"velocity from before this step"


@cuda.jit
def sgd_momentum_kernel(param, grad, velocity, lr, momentum, weight_decay):
    i = cuda.grid(1)
    if i < param.size:
        p = param[i]
        v = velocity[i]
        param[i] = p - lr * v
        velocity[i] = momentum * v + grad[i] + weight_decay * p


def sgd_momentum_step(param, grad, velocity, lr, momentum, weight_decay):
    sgd_momentum_kernel[blocks_for(param.size), BLOCK_SIZE](param, grad, velocity, lr, momentum, weight_decay)
