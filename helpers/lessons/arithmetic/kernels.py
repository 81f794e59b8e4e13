"""Notebook 02's ``fma_chain_kernel``: the same bytes per element (read 4, write 4) with 8 x ``rounds`` fused
multiply-adds in between.  The notebook's cell is its source, copied here by ``scripts/export_kernels.py``;
:func:`helpers.lessons.arithmetic.measure.sweep_fmas` times it.
"""

import numpy as np
from numba import cuda


# >>> exported from notebooks/02_the_arithmetic_is_not_the_cost.ipynb (the cell defining fma_chain_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def fma_chain_kernel(x, out, rounds):
    i = cuda.grid(1)
    if i < out.size:
        y = x[i]
        for _ in range(rounds):  # a runtime count: the compiler cannot fold the work away
            for _ in range(8):  # a fixed count it unrolls, so loop bookkeeping is paid once per 8 FMAs
                y = y * np.float32(0.999) + np.float32(0.001)
        out[i] = y


def fma_chain_reference(x, fmas):  # the same chain in NumPy, on the host
    y = x.copy()
    for _ in range(fmas):
        y = y * np.float32(0.999) + np.float32(0.001)
    return y
# <<< end of the export from notebooks/02_the_arithmetic_is_not_the_cost.ipynb
