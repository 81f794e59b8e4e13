"""Exercise 5: no bounds guard."""
from numba import cuda

from _parts.ex5 import adamw_element, launch  # the right pieces; the mistake is the missing guard below

EXPECTED = r"past the end.*bounds guard"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    adamw_element(i, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    launch(adamw_kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
