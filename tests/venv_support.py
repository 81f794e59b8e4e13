"""A fresh virtual environment that sees the installed packages of this one, but not this checkout.

Installing numba, numba-cuda and the CUDA libraries anew for each test would take minutes
and need the network, so the new environment borrows them: a ``.pth`` file in it appends
this environment's site-packages to ``sys.path`` and runs that folder's ``.pth`` files (so
that, say, numba-cuda's redirection of ``numba.cuda`` works), all but the ones that put
this checkout on the path (the project's editable install).  Whatever the test then
installs into the new environment comes first, and ``helpers`` is found only where the
test put it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SHIM = '''"""Borrow the packages of {deps!r} (written by tests/venv_support.py)."""
import os, site, sys

FOLDERS, CHECKOUT = {deps!r}, {checkout!r}
for DEPS in FOLDERS:
    sys.path.append(DEPS)
    for name in sorted(os.listdir(DEPS)):
        if name.endswith(".pth") and not name.startswith("__editable__"):
            with open(os.path.join(DEPS, name)) as f:
                if CHECKOUT not in f.read():
                    site.addpackage(DEPS, name, set())
'''


def borrowed_folders() -> list[str]:
    """Where this process finds its packages: the folders on ``PYTHONPATH`` but the checkout, then site-packages.

    On a GPU machine whose image has the wrong NumPy, the right one comes from a folder on
    ``PYTHONPATH`` (scripts/gpu_run.sh), so that folder must come first in the new environment too.
    """
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p and Path(p).is_dir() and Path(p).resolve() != ROOT]
    return extra + [sysconfig.get_paths()["purelib"]]


def venv_with_deps(folder: Path, wheel: Path | None = None) -> Path:
    """Make the environment in ``folder`` (no pip in it), install ``wheel`` alone into it, and return its python.

    The wheel goes in before the packages are borrowed, and pip runs away from this checkout: it
    would otherwise see the project's editable install (or its ``*.egg-info`` in the current folder)
    and take the wheel as already installed.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    if wheel is not None:
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)],
                       check=True, capture_output=True, timeout=300, cwd=folder, env=outside_env())
    site_packages = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    deps = borrowed_folders()
    for folder in deps:
        if (Path(folder) / "helpers").is_dir():
            import pytest

            pytest.skip(f"{folder} holds an installed copy of helpers (not `pip install -e .`): it would be borrowed too")
    (site_packages / "_borrowed_packages.py").write_text(_SHIM.format(deps=deps, checkout=str(ROOT)))
    (site_packages / "_borrowed_packages.pth").write_text("import _borrowed_packages\n")
    return python


def outside_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that points Python at this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(extra)
    return env
