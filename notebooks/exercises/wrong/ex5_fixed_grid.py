"""Exercise 5: the right kernel launched on a grid written into the code, `[4, 256]`."""
from _parts.ex5 import adamw_kernel  # the right kernel; the mistake is its launch

EXPECTED = r"launched with 1024 threads \(4 blocks of 256\) at every size, so at n = \d+ its grid does not cover n"


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    correction1 = 1 - beta1**step
    correction2 = 1 - beta2**step
    adamw_kernel[4, 256](param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2)
