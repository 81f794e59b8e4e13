"""Exercise 5: the parameter is updated with the moments from before this step."""
from numba import cuda

from _parts.ex5 import adam_update, decayed, launch, new_moments  # the right pieces; the mistake is below

EXPECTED = r"updated with m and v from before this step"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        old_m, old_v = m[i], v[i]
        new_moments(i, grad[i], m, v, beta1, beta2)
        param[i] = adam_update(decayed(param[i], lr, weight_decay), old_m, old_v, lr, eps, correction1, correction2)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    launch(adamw_kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
