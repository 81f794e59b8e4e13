"""Import helpers first: it picks the CUDA backend before anything imports numba."""

import helpers  # noqa: F401
