"""Which compiler turns the lessons' kernels into GPU code: numba-cuda (the default) or numba-cuda-mlir.

numba-cuda, NVIDIA's CUDA target for Numba, is in maintenance mode; new work goes to
numba-cuda-mlir, a separate package (``from numba_cuda_mlir import cuda``) that does
not need Numba itself and has no CUDA simulator.  The lessons write
``from numba import cuda`` and ``from numba import float32``, so to compile them with
numba-cuda-mlir *unchanged*, ``HELPERS_COMPILER=mlir`` makes ``import helpers``
answer the name ``numba`` with numba-cuda-mlir's modules, before anything imports
numba:

=======================  ===================================================
``numba``                a module whose names (``float32``, ``int32``, ...) are
                         numba-cuda-mlir's types
``numba.cuda``           ``numba_cuda_mlir.cuda``
``numba.cuda.<x>``       ``numba_cuda_mlir.numba_cuda.<x>``
``numba.core.<x>``       ``numba_cuda_mlir.numba_cuda.core.<x>``, else ``numba_cuda_mlir.numba_cuda.<x>``
=======================  ===================================================

A name numba-cuda-mlir does not have raises ``ImportError`` naming it: nothing half-works.
The simulator is numba-cuda's alone, so ``HELPERS_COMPILER=mlir`` needs a GPU.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

COMPILER_ENV = "HELPERS_COMPILER"
NUMBA_CUDA = "numba-cuda"
MLIR = "numba-cuda-mlir"
_NAMES = {"": NUMBA_CUDA, "numba-cuda": NUMBA_CUDA, "numba_cuda": NUMBA_CUDA, "default": NUMBA_CUDA,
          "mlir": MLIR, "numba-cuda-mlir": MLIR, "numba_cuda_mlir": MLIR}


class CompilerError(RuntimeError):
    """The compiler asked for cannot be used here."""


def requested(value: str | None = None) -> str:
    """The compiler ``HELPERS_COMPILER`` names (numba-cuda when unset); an unknown name is refused."""
    text = (os.environ.get(COMPILER_ENV, "") if value is None else value).strip().lower()
    if text not in _NAMES:
        raise CompilerError(f"{COMPILER_ENV}={text!r} names no compiler this series knows: use 'mlir' "
                            "(numba-cuda-mlir) or leave it unset (numba-cuda)")
    return _NAMES[text]


def _target(name: str) -> str | None:
    """The numba-cuda-mlir module that stands for numba's module ``name`` (None for ``numba`` itself)."""
    if name == "numba":
        return None
    if name == "numba.cuda":
        return "numba_cuda_mlir.cuda"
    if name == "numba.core":
        return "numba_cuda_mlir.numba_cuda.core"
    rest = name.split(".", 2)[2] if name.count(".") >= 2 else ""
    homes = {"numba.cuda.": ["numba_cuda_mlir.numba_cuda."],
             "numba.core.": ["numba_cuda_mlir.numba_cuda.core.", "numba_cuda_mlir.numba_cuda."]}
    for prefix, candidates in homes.items():
        if name.startswith(prefix):
            for home in candidates:
                if importlib.util.find_spec(home + rest.split(".")[0]) is not None:
                    return home + rest
    raise ImportError(f"{name} has no counterpart in numba-cuda-mlir ({COMPILER_ENV}=mlir): "
                      "this code needs numba-cuda; unset the variable")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import numba...`` with numba-cuda-mlir's modules."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "numba" and not fullname.startswith("numba."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> Any:
        home = _target(spec.name)
        if home is None:
            return _numba_stand_in()
        return importlib.import_module(home)

    def exec_module(self, module: Any) -> None:
        pass  # the module is numba-cuda-mlir's own, already executed


def _numba_stand_in() -> types.ModuleType:
    from numba_cuda_mlir import __version__, cuda

    module = types.ModuleType("numba", "numba-cuda-mlir standing in for numba (HELPERS_COMPILER=mlir)")
    module.__path__ = []  # a package, so that `import numba.cuda` is asked of the finder
    module.__version__ = f"numba-cuda-mlir {__version__}"
    module.cuda = cuda

    def __getattr__(name: str) -> Any:  # numba.float32, numba.int32, numba.types ...
        if hasattr(cuda, name):
            return getattr(cuda, name)
        raise AttributeError(f"numba-cuda-mlir has no `{name}` (asked for as numba.{name})")

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return module


def install(compiler: str, simulator: bool) -> str:
    """Make ``compiler`` the one ``import numba`` reaches; return its name and version for the banner."""
    if compiler == NUMBA_CUDA:
        return ""
    if simulator:
        raise CompilerError(f"{COMPILER_ENV}=mlir needs a GPU: numba-cuda-mlir has no CUDA simulator. "
                            "Unset the variable to use the simulator with numba-cuda")
    if any(name == "numba" or name.startswith("numba.") for name in sys.modules):
        raise CompilerError(f"numba was imported before helpers, so {COMPILER_ENV}=mlir cannot take effect: "
                            "restart the kernel and run `import helpers` first")
    try:
        import numba_cuda_mlir
    except ImportError as exc:
        raise CompilerError(f"{COMPILER_ENV}=mlir, but numba-cuda-mlir is not installed "
                            "(pip install 'numba-cuda-mlir[cu13]')") from exc
    sys.meta_path.insert(0, _Alias())
    return f"numba-cuda-mlir {numba_cuda_mlir.__version__}"
