"""Exercise 5: eps added under the square root."""
import math

from numba import cuda

from _parts.ex5 import decayed, launch, new_moments  # the right pieces; the mistake is below

EXPECTED = r"eps belongs outside the square root"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        p = decayed(param[i], lr, weight_decay)
        m_new, v_new = new_moments(i, grad[i], m, v, beta1, beta2)
        param[i] = p - lr * (m_new / correction1) / math.sqrt(v_new / correction2 + eps)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    launch(adamw_kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
