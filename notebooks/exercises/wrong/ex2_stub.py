"""Exercise 2, the stub as handed out."""
from numba import cuda

EXPECTED = r"still the exercise stub"


@cuda.jit
def normalize_kernel(x, mean, inv_std, gamma, beta, out):
    # YOUR CODE HERE
    raise NotImplementedError()


def normalize_fused(x, mean, inv_std, gamma, beta, out):
    # YOUR CODE HERE
    raise NotImplementedError()
