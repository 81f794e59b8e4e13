"""Exercise 5: the gradient of element 0 used everywhere: right only when every gradient is the same."""
from numba import cuda

from _parts.ex5 import adam_update, decayed, launch, new_moments  # the right pieces; the mistake is below

EXPECTED = r"element \d+ of `\w+` is .*expected"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        m_new, v_new = new_moments(i, grad[0], m, v, beta1, beta2)
        param[i] = adam_update(decayed(param[i], lr, weight_decay), m_new, v_new, lr, eps, correction1, correction2)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    launch(adamw_kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
