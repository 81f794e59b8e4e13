"""The right pieces of exercise 5 (one fused AdamW step) that several fixtures share.

The update of one element, as the solution notebook writes it::

    p = p - lr * weight_decay * p                 # decoupled weight decay
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    p = p - lr * (m / correction1) / (sqrt(v / correction2) + eps)

Each piece is a device function, so a fixture can get one of them wrong and take the
others from here; the compiler inlines them, so the kernel moves the same bytes.
"""
import math

from numba import cuda

from helpers.sizes import BLOCK_SIZE, blocks_for


@cuda.jit(device=True)
def decayed(p, lr, weight_decay):
    """The parameter after the decoupled weight decay."""
    return p - lr * weight_decay * p


@cuda.jit(device=True)
def new_moments(i, g, m, v, beta1, beta2):
    """Store element i's new moments for gradient g in m and v, and return them."""
    m_new = beta1 * m[i] + (1 - beta1) * g
    v_new = beta2 * v[i] + (1 - beta2) * g * g
    m[i] = m_new
    v[i] = v_new
    return m_new, v_new


@cuda.jit(device=True)
def adam_update(p, m_new, v_new, lr, eps, correction1, correction2):
    """The (decayed) parameter p moved by the bias-corrected moments."""
    return p - lr * (m_new / correction1) / (math.sqrt(v_new / correction2) + eps)


@cuda.jit(device=True)
def adamw_element(i, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    """One whole AdamW step of element i: param, m and v updated in place."""
    m_new, v_new = new_moments(i, grad[i], m, v, beta1, beta2)
    param[i] = adam_update(decayed(param[i], lr, weight_decay), m_new, v_new, lr, eps, correction1, correction2)


@cuda.jit
def adamw_kernel(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    """The fused kernel: one thread per element."""
    i = cuda.grid(1)
    if i < param.size:
        adamw_element(i, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2)


def launch(kernel, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    """Launch ``kernel`` (adamw_kernel's arguments) on one thread per element, with step's bias corrections."""
    correction1 = 1 - beta1**step
    correction2 = 1 - beta2**step
    kernel[blocks_for(param.size), BLOCK_SIZE](
        param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2
    )
