"""Shared plumbing for the "Three kernels or one" notebooks.

Importing this package chooses the CUDA backend *before* numba is imported:
a real GPU when the CUDA driver finds one, Numba's CUDA simulator otherwise.
So the first line of every notebook is ``import helpers``.
"""

from __future__ import annotations

from .backend import choose_backend as _choose_backend

BACKEND: str = _choose_backend()

from .backend import banner, check_numba_cuda, is_simulator  # noqa: E402

check_numba_cuda()

__all__ = ["BACKEND", "banner", "is_simulator", "start"]


def start() -> None:
    """Print the banner line that opens every notebook, e.g. ``backend: simulator``."""
    print(banner())
