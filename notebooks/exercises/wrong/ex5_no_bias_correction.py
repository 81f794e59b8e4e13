"""Exercise 5: the moments are used as they are, without the bias corrections."""
import math

from numba import cuda

from _parts.ex5 import decayed, launch, new_moments  # the right pieces; the mistake is below

EXPECTED = r"no bias correction"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        m_new, v_new = new_moments(i, grad[i], m, v, beta1, beta2)
        param[i] = decayed(param[i], lr, weight_decay) - lr * m_new / (math.sqrt(v_new) + eps)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    launch(adamw_kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
