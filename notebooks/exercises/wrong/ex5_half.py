"""Exercise 5: the kernel updates only every other element."""
from numba import cuda

from _parts.ex5 import adamw_element, launch  # the right pieces; the mistake is the guard below

EXPECTED = r"(never updated|elements are wrong)"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size and i % 2 == 0:
        adamw_element(i, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    launch(adamw_kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
