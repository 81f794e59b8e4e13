"""The first code cell of every notebook, written so that a wrong setup says what to do.

A learner who opens a notebook with the wrong kernel (a system Python, another
project's environment) or from a copy outside the project cannot import
``helpers``.  Python's bare ``ModuleNotFoundError: No module named 'helpers'`` does
not say how to recover, so the first cell catches it and says it plainly.

That cell cannot import anything from this module (it runs exactly when
``helpers`` is missing), so the text lives here only as the single source that
``scripts/first_cell.py`` writes into the notebooks and that
``tests/test_friendly.py`` checks them against.
"""

from __future__ import annotations

KERNEL_DISPLAY_NAME = "Python (three kernels or one)"
"""The Jupyter kernel that ``make setup`` registers (see the Makefile)."""

FIRST_CELL = f'''# NBVAL_IGNORE_OUTPUT
try:
    import helpers  # first: it picks the GPU or the simulator before numba loads
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        f"{{missing.name!r}} cannot be imported: this kernel is not the project's environment. "
        "In a terminal, in the project folder, run `make lab` and open the notebook in the JupyterLab it starts, "
        "or pick Kernel > Change Kernel > '{KERNEL_DISPLAY_NAME}'."
    ) from None
helpers.start()'''
"""Source of the first code cell of every notebook (lessons, exercises, solutions)."""


def is_first_cell(source: str) -> bool:
    """True when ``source`` is exactly :data:`FIRST_CELL` (trailing whitespace aside)."""
    return source.rstrip() == FIRST_CELL.rstrip()
