"""Exercise 5: the guard starts at 1, so element 0 is never updated."""
from numba import cuda

from _parts.ex5 import adamw_element, launch  # the right pieces; the mistake is the guard below

EXPECTED = r"element 0 of `param` was never updated"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if 0 < i < param.size:
        adamw_element(i, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    launch(adamw_kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
