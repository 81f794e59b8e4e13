"""Exercise 5: right values, but the given four launches, one per update."""
import math

from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"you made 8 trips to memory in 4 launches .*, more than this computation needs"


@cuda.jit
def decay(param, lr, weight_decay):
    i = cuda.grid(1)
    if i < param.size:
        param[i] = param[i] - lr * weight_decay * param[i]


@cuda.jit
def first_moment(m, grad, beta1):
    i = cuda.grid(1)
    if i < m.size:
        m[i] = beta1 * m[i] + (1 - beta1) * grad[i]


@cuda.jit
def second_moment(v, grad, beta2):
    i = cuda.grid(1)
    if i < v.size:
        v[i] = beta2 * v[i] + (1 - beta2) * grad[i] * grad[i]


@cuda.jit
def update(param, m, v, lr, eps, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        param[i] = param[i] - lr * (m[i] / correction1) / (math.sqrt(v[i] / correction2) + eps)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    correction1 = 1 - beta1**step
    correction2 = 1 - beta2**step
    blocks = blocks_for(param.size)
    decay[blocks, BLOCK_SIZE](param, lr, weight_decay)
    first_moment[blocks, BLOCK_SIZE](m, grad, beta1)
    second_moment[blocks, BLOCK_SIZE](v, grad, beta2)
    update[blocks, BLOCK_SIZE](param, m, v, lr, eps, correction1, correction2)
