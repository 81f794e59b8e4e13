"""Shared plumbing for the "Three kernels or one" notebooks.

Importing this package chooses the CUDA backend *before* numba is imported:
a real GPU when the CUDA driver finds one, Numba's CUDA simulator otherwise.
So the first line of every notebook is ``import helpers``.
"""

from __future__ import annotations

import warnings as _warnings

from .backend import choose_backend as _choose_backend

# The series launches small grids on purpose (correctness checks on tiny and awkward
# sizes); numba's occupancy warning would bury the outputs that matter.
_warnings.filterwarnings("ignore", message=r".*Grid size .* will likely result in GPU under-utilization")

BACKEND: str = _choose_backend()

from .backend import COMPILER as _COMPILER  # noqa: E402
from .backend import install as _install_compiler, requested as _requested_compiler  # noqa: E402

_COMPILER[0] = _install_compiler(_requested_compiler(), BACKEND == "simulator")  # HELPERS_COMPILER=mlir

from .backend import check_numba_cuda, is_simulator  # noqa: E402
from .device import banner  # noqa: E402

check_numba_cuda()

__all__ = ["BACKEND", "banner", "is_simulator", "start"]


def start() -> None:
    """Print the banner line that opens every notebook, e.g. ``backend: simulator``."""
    print(banner())
