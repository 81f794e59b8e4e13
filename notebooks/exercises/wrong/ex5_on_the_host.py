"""Exercise 5: the whole step computed with NumPy on the host, copied back in place; an empty kernel is launched for show."""
import numpy as np
from numba import cuda

EXPECTED = r"`param` was written by a copy from the host \(`param.copy_to_device\(...\)`.*not by your kernel.*it copied `param`, `grad`, `m` and `v` to the host first"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    pass


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    p, g, m_, v_ = (a.copy_to_host() for a in (param, grad, m, v))
    p = p - lr * weight_decay * p
    m_ = beta1 * m_ + (1 - beta1) * g
    v_ = beta2 * v_ + (1 - beta2) * g * g
    p = p - lr * (m_ / (1 - beta1**step)) / (np.sqrt(v_ / (1 - beta2**step)) + eps)
    param.copy_to_device(p.astype(np.float32))
    m.copy_to_device(m_.astype(np.float32))
    v.copy_to_device(v_.astype(np.float32))
    adamw_kernel[1, 1](param, grad, m, v, lr, beta1, beta2, eps, weight_decay, 1.0, 1.0)
