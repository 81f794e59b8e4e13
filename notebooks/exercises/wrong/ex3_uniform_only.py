"""Exercise 3: weight decay applied to the gradient. Right when param equals grad (uniform inputs)."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"weight decay scales the parameter"


@cuda.jit
def sgd_momentum_kernel(param, grad, velocity, lr, momentum, weight_decay):
    i = cuda.grid(1)
    if i < param.size:
        g = grad[i]
        v = momentum * velocity[i] + g + weight_decay * g
        velocity[i] = v
        param[i] = param[i] - lr * v


def sgd_momentum_step(param, grad, velocity, lr, momentum, weight_decay):
    sgd_momentum_kernel[blocks_for(param.size), BLOCK_SIZE](param, grad, velocity, lr, momentum, weight_decay)
