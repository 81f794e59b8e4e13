"""Exercise 5: weight decay added to the gradient (Adam with an L2 penalty), so it goes through the moments."""
from numba import cuda

from _parts.ex5 import adam_update, launch, new_moments  # the right pieces; the mistake is below

EXPECTED = r"weight decay to the gradient, so it went into m and v"


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        g = grad[i] + weight_decay * param[i]
        m_new, v_new = new_moments(i, g, m, v, beta1, beta2)
        param[i] = adam_update(param[i], m_new, v_new, lr, eps, correction1, correction2)  # no decoupled decay: it is in g


def adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    launch(adamw_kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
