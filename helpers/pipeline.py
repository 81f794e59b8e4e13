"""The chapter's pipeline, ``out = (a + b) * c / s``, as the notebooks write it.

Notebooks 01 and 03 show these kernels in their own cells so that a learner reads
(and can edit) them there: those cells are their source, copied here between the export
markers by ``scripts/export_kernels.py``.  Later notebooks, the benchmarks and the tests import them
from here: :func:`run_three_kernels` and :func:`run_fused` check their arguments, then
launch through :func:`launch_three` and :func:`launch_fused`, the one way the series
launches them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from .sizes import BLOCK_SIZE, blocks_for
from .validate import check_elementwise, require_scalar


# >>> exported from notebooks/01_three_kernels.ipynb (the cell defining add_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def add_kernel(x, y, out):
    i = cuda.grid(1)
    if i < out.size:  # the last block runs past the end of the arrays
        out[i] = x[i] + y[i]


@cuda.jit
def multiply_kernel(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * y[i]


@cuda.jit
def scale_kernel(x, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] / s
# <<< end of the export from notebooks/01_three_kernels.ipynb


# >>> exported from notebooks/03_one_fused_kernel.ipynb (the cell defining fused_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def fused_kernel(a, b, c, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (a[i] + b[i]) * c[i] / s  # t1 and t2 live in registers only
# <<< end of the export from notebooks/03_one_fused_kernel.ipynb


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: float) -> np.ndarray:
    """NumPy's answer, in the same dtype and operation order as the kernels."""
    s = a.dtype.type(s)
    return ((a + b) * c) / s


def scalar_for(name: str, value: Any, dtype: Any, *, nonzero: bool = False) -> Any:
    """``value`` checked (one finite number, non-zero if asked), cast to ``dtype``, and checked again.

    The kernels compute in the arrays' dtype, so the check that counts is on the cast
    value: ``float32(1e39)`` is inf and ``float32(1e-46)`` is 0, though both pass as floats.
    """
    number = require_scalar(name, value, nonzero=nonzero)
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore", under="ignore"):
        cast = dtype.type(number)
    if not np.isfinite(cast):
        raise ValueError(f"`{name}` is {number:g}, beyond the largest {dtype} ({np.finfo(dtype).max:g}): "
                         f"in {dtype} it becomes {cast}, and every result would be 0, infinite or NaN. "
                         f"Pass a smaller number, or use float64 arrays.")
    if nonzero and cast == 0:
        raise ValueError(f"`{name}` is {number:g}, closer to 0 than the smallest {dtype} "
                         f"({np.finfo(dtype).smallest_subnormal:g}): in {dtype} it becomes 0, and dividing by it "
                         f"makes every result infinite. Pass a larger number, or use float64 arrays.")
    return cast


def run_three_kernels(a: Any, b: Any, c: Any, s: float, t1: Any, t2: Any, out: Any) -> None:
    """Launch add, multiply and scale: three launches, t1 and t2 round-tripping through memory.

    ``a``, ``b``, ``c``, ``t1``, ``t2`` and ``out`` are 1-D float device arrays of one
    length and dtype; ``t1``, ``t2`` and ``out`` must not share memory with the inputs
    (they may share it with each other).  ``s`` is a finite, non-zero number, also in the
    arrays' dtype (see :func:`scalar_for`).
    """
    check_elementwise({"a": a, "b": b, "c": c, "t1": t1, "t2": t2, "out": out}, outputs=("t1", "t2", "out"))
    launch_three(a, b, c, scalar_for("s", s, a.dtype, nonzero=True), t1, t2, out)


def run_fused(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
    """Launch the fused kernel: one launch, reading a, b, c once and writing out once.

    The arrays are 1-D float device arrays of one length and dtype, ``out`` apart from
    the inputs; ``s`` is a finite, non-zero number, also in the arrays' dtype.
    """
    check_elementwise({"a": a, "b": b, "c": c, "out": out}, outputs=("out",))
    launch_fused(a, b, c, scalar_for("s", s, a.dtype, nonzero=True), out)


def _launch(n: int, stream: Any) -> tuple[Any, ...]:
    """The launch configuration for n elements: on ``stream``, or on Numba's default stream when it is None."""
    return (blocks_for(n), BLOCK_SIZE) if stream is None else (blocks_for(n), BLOCK_SIZE, stream)


def launch_three(a: Any, b: Any, c: Any, s: Any, t1: Any, t2: Any, out: Any, stream: Any = None) -> None:
    """The three launches of :func:`run_three_kernels`, unchecked: ``s`` already in the arrays' dtype.

    For code that checked its arrays once and launches many times (a benchmark), or that
    records the launches on a ``stream`` (a CUDA graph's capture).
    """
    launch = _launch(out.size, stream)
    add_kernel[launch](a, b, t1)
    multiply_kernel[launch](t1, c, t2)
    scale_kernel[launch](t2, s, out)


def launch_fused(a: Any, b: Any, c: Any, s: Any, out: Any, stream: Any = None) -> None:
    """The one launch of :func:`run_fused`, unchecked, on ``stream`` (Numba's default stream when None)."""
    fused_kernel[_launch(out.size, stream)](a, b, c, s, out)
