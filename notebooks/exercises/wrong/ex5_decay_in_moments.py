"""Exercise 5: weight decay added to the gradient (Adam with an L2 penalty), so it goes through the moments."""
import math

from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for

EXPECTED = r"weight decay to the gradient, so it went into m and v"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        g = grad[i] + weight_decay * param[i]
        p = param[i]
        # no decoupled decay: it is in g
        m_new = beta1 * m[i] + (1 - beta1) * g
        v_new = beta2 * v[i] + (1 - beta2) * g * g
        m[i] = m_new
        v[i] = v_new
        param[i] = p - lr * (m_new / correction1) / (math.sqrt(v_new / correction2) + eps)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    correction1 = 1 - beta1**step
    correction2 = 1 - beta2**step
    adamw_kernel[blocks_for(param.size), BLOCK_SIZE](
        param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2
    )
