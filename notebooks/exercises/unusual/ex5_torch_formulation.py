"""Exercise 5 as torch writes it: the step size and the bias corrections computed in the kernel from `step`,
an early return, 128 threads per block, and a grid-stride loop on a fixed grid of 3 blocks."""
import math

from numba import cuda


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    start = cuda.grid(1)
    if start >= param.size:
        return
    step_size = lr / (1 - beta1**step)
    root_correction = math.sqrt(1 - beta2**step)
    for i in range(start, param.size, cuda.gridsize(1)):
        g = grad[i]
        p = param[i] * (1 - lr * weight_decay)
        m_new = beta1 * m[i] + (1 - beta1) * g
        v_new = beta2 * v[i] + (1 - beta2) * g * g
        m[i] = m_new
        v[i] = v_new
        param[i] = p - step_size * m_new / (math.sqrt(v_new) / root_correction + eps)


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    adamw_kernel[3, 128](param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
