"""Exercise 1: right values computed with NumPy on the host and copied into `out`; no kernel at all."""
import numpy as np

EXPECTED = r"`out` was written by a copy from the host"


def saxpy_relu(a, x, y, out):
    out.copy_to_device(np.maximum(a * x.copy_to_host() + y.copy_to_host(), 0).astype(np.float32))
