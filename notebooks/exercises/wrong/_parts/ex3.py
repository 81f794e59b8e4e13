"""The right element update of exercise 3 (SGD with momentum and weight decay), for the fixtures whose mistake is the guard around it.

Not a solution to hand out: students find the same lines in the solution notebook.
"""
from numba import cuda


@cuda.jit(device=True)
def sgd_momentum_element(i, param, grad, velocity, lr, momentum, weight_decay):
    """Element i's step: velocity and param updated in place."""
    p = param[i]
    v = momentum * velocity[i] + grad[i] + weight_decay * p
    velocity[i] = v
    param[i] = p - lr * v
