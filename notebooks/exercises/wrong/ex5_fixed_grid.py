"""Exercise 5: the right kernel launched on a grid written into the code, `[4, 256]`."""
import math

from numba import cuda

EXPECTED = r"launched with 1024 threads \(4 blocks of 256\) at every size, so at n = \d+ its grid does not cover n"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        g = grad[i]
        p = param[i]
        p = p - lr * weight_decay * p
        m_new = beta1 * m[i] + (1 - beta1) * g
        v_new = beta2 * v[i] + (1 - beta2) * g * g
        m[i] = m_new
        v[i] = v_new
        param[i] = p - lr * (m_new / correction1) / (math.sqrt(v_new / correction2) + eps)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    correction1 = 1 - beta1**step
    correction2 = 1 - beta2**step
    adamw_kernel[4, 256](param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2)
