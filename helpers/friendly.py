"""The first code cell of every notebook, and the links that open a notebook elsewhere.

The first cell does three jobs, and a learner reads it before anything else, so it
stays short:

* **On Colab** (``COLAB_RELEASE_TAG`` is set), once per runtime, it installs this
  project from its repository with pip: with numba-cuda's CUDA 12 libraries when the
  driver's ``nvidia-smi`` says ``CUDA Version: 12.x`` (or older), with the CUDA 13 ones
  otherwise, no GPU included (there the simulator runs the kernels and NVVM, which
  comes with the CUDA libraries, still compiles them to PTX).  It then leaves a file,
  :data:`INSTALLED_MARK`, so that running the cell again does not install again.
* **Elsewhere**, when ``helpers`` cannot be imported (a system Python, another
  project's kernel, a stray copy of a notebook), it replaces Python's bare
  ``ModuleNotFoundError: No module named 'helpers'`` with what to do.
* Then ``import helpers; helpers.start()``: the banner line.  In the project's own
  environment this is all it does.

That cell cannot import anything from this module (it runs exactly when ``helpers``
may be missing), so its text lives here only as the single source that
``scripts/first_cell.py`` writes into the notebooks and that ``tests/test_friendly.py``
and ``tests/test_colab_cell.py`` check.

:data:`REPOSITORY` is the one place that names the repository's address: the cell's
pip install, the notebooks' Open-in-Colab badges and the README's badges are built
from it (``tests/test_packaging.py`` checks the README, ``pyproject.toml`` and
``binder/``).  To publish the project somewhere else, change it here, run
``scripts/first_cell.py`` on the notebooks (see its docstring), and follow the tests.
"""

from __future__ import annotations

from urllib.parse import quote

REPOSITORY = "https://github.com/three-kernels-or-one/three-kernels-or-one"
"""The project's public repository (GitHub): what Colab installs from and opens."""

BRANCH = "main"
"""The branch that the badges open."""

DISTRIBUTION = "three-kernels-or-one"
"""The name pip knows the project by (``[project] name`` in pyproject.toml)."""

KERNEL_NAME = "three-kernels-or-one"
"""The Jupyter kernel that ``make lab`` registers, and that the notebooks name."""

KERNEL_DISPLAY_NAME = "Python (three kernels or one)"
"""Its display name (see the Makefile)."""

KERNELSPEC = {"name": KERNEL_NAME, "display_name": KERNEL_DISPLAY_NAME, "language": "python"}
"""The ``metadata.kernelspec`` of every notebook."""

INSTALLED_MARK = "~/.three-kernels-or-one-installed"
"""The file the first cell leaves on Colab once the install has worked (it holds the extra)."""

COLAB_BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE_IMAGE = "https://mybinder.org/badge_logo.svg"


def _owner_and_name() -> str:
    prefix = "https://github.com/"
    if not REPOSITORY.startswith(prefix) or REPOSITORY.count("/") != 4:
        raise ValueError(f"REPOSITORY must look like {prefix}<owner>/<name>, not {REPOSITORY!r}")
    return REPOSITORY.removeprefix(prefix)


def colab_url(path: str) -> str:
    """Colab's address for the notebook at ``path`` (relative to the repository root)."""
    return f"https://colab.research.google.com/github/{_owner_and_name()}/blob/{BRANCH}/{path}"


def colab_badge(path: str) -> str:
    """The Open-in-Colab badge line (markdown) for the notebook at ``path``."""
    return f"[![Open in Colab]({COLAB_BADGE_IMAGE})]({colab_url(path)})"


def binder_url(path: str = "notebooks") -> str:
    """mybinder.org's address for this repository, opening JupyterLab at ``path``."""
    return f"https://mybinder.org/v2/gh/{_owner_and_name()}/{BRANCH}?urlpath={quote('lab/tree/' + path, safe='')}"


IMPORT_OR_EXPLAIN = f'''try:
    import helpers  # first: it picks the GPU or the simulator before numba loads
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        f"{{missing.name!r}} cannot be imported: this kernel is not the project's environment. "
        "In a terminal, in the project folder, run `make lab` and open the notebook in the JupyterLab it starts, "
        "or pick Kernel > Change Kernel > '{KERNEL_DISPLAY_NAME}'."
    ) from None
helpers.start()'''
"""The end of the first cell: import ``helpers`` (or say what to do when it is missing), then start.

A first cell that ``scripts/first_cell.py`` wrote before the Colab install was
``# NBVAL_IGNORE_OUTPUT`` and this alone, so that script builds it from here too.
"""

FIRST_CELL = f'''# NBVAL_IGNORE_OUTPUT
import os, re, subprocess, sys
installed = os.path.expanduser("{INSTALLED_MARK}")
if "COLAB_RELEASE_TAG" in os.environ and not os.path.exists(installed):
    # Colab, once per runtime: install this course's code from GitHub, with the CUDA 12 libraries
    # for a CUDA 12 driver, else the CUDA 13 ones (without a GPU they still compile kernels to PTX).
    smi = subprocess.run("nvidia-smi", shell=True, capture_output=True, text=True).stdout
    driver = re.search(r"CUDA Version: (\\d+)", smi)
    extra = "cu12" if driver and int(driver[1]) <= 12 else "cu13"
    print(f"installing the course's code ({{extra}}), about a minute, once per runtime ...")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"{DISTRIBUTION}[{{extra}}] @ git+{REPOSITORY}"], check=True)
    open(installed, "w").write(extra)
    import importlib; importlib.invalidate_caches()
''' + IMPORT_OR_EXPLAIN
"""Source of the first code cell of every notebook (lessons, exercises, solutions)."""


def is_first_cell(source: str) -> bool:
    """True when ``source`` is exactly :data:`FIRST_CELL` (trailing whitespace aside)."""
    return source.rstrip() == FIRST_CELL.rstrip()
