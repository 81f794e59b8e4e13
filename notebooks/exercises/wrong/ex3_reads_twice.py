"""Exercise 3: one kernel, but param and velocity are read again after the velocity is stored."""
from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

SIMULATOR_ONLY = True  # on a GPU the compiler may load each element once anyway
EXPECTED = r"moves [0-9.]+ bytes per element; 20 are enough"


@cuda.jit
def sgd_momentum_kernel(param, grad, velocity, lr, momentum, weight_decay):
    i = cuda.grid(1)
    if i < param.size:
        velocity[i] = momentum * velocity[i] + grad[i] + weight_decay * param[i]
        param[i] = param[i] - lr * velocity[i]


def sgd_momentum_step(param, grad, velocity, lr, momentum, weight_decay):
    sgd_momentum_kernel[blocks_for(param.size), BLOCK_SIZE](param, grad, velocity, lr, momentum, weight_decay)
