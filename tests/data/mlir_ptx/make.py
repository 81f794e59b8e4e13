"""Write the PTX numba-cuda-mlir gives some of the lessons' kernels, for sm_90, for tests/test_ptx.py.

    python tests/data/mlir_ptx/make.py      # where numba-cuda-mlir is installed; no GPU needed

numba-cuda-mlir asks the driver for the GPU's compute capability even to compile for a named one, so
without a GPU this answers (9, 0) for it.
"""

from pathlib import Path

import numba_cuda_mlir.tools as tools

tools.get_gpu_compute_capability = lambda *args, **kwargs: (9, 0)

from numba_cuda_mlir import cuda  # noqa: E402
from numba_cuda_mlir.numba_cuda import types  # noqa: E402

HERE = Path(__file__).resolve().parent


def fused_kernel(a, b, c, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (a[i] + b[i]) * c[i] / s


def grid_stride_kernel(a, b, c, s, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, out.size, stride):
        out[i] = (a[i] + b[i]) * c[i] / s


def row_copy_kernel(x, out):
    row, col = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = x[row, col]


if __name__ == "__main__":
    vector, matrix = types.float32[::1], types.float32[:, ::1]
    kernels = {fused_kernel: (vector, vector, vector, types.float32, vector),
               grid_stride_kernel: (vector, vector, vector, types.float32, vector),
               row_copy_kernel: (matrix, matrix)}
    for function, signature in kernels.items():
        ptx, _ = cuda.compile_ptx(function, signature, cc=(9, 0))
        (HERE / f"{function.__name__}.ptx").write_text(ptx)
        print("wrote", function.__name__)
