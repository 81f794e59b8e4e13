"""Exercise 5 with the parameter update inside `if m_new != 0:` (where the first moment is 0 the update is 0)."""
import math

from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        g = grad[i]
        p = param[i] - lr * weight_decay * param[i]
        m_new = beta1 * m[i] + (1 - beta1) * g
        v_new = beta2 * v[i] + (1 - beta2) * g * g
        m[i] = m_new
        v[i] = v_new
        if m_new != 0:
            param[i] = p - lr * (m_new / correction1) / (math.sqrt(v_new / correction2) + eps)
        else:
            param[i] = p


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    adamw_kernel[blocks_for(param.size), BLOCK_SIZE](
        param, grad, m, v, lr, beta1, beta2, eps, weight_decay, 1 - beta1**step, 1 - beta2**step
    )
