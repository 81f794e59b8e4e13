"""Choose Numba's CUDA backend -- a real GPU or the CUDA simulator -- and its compiler, before numba loads.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when it is first imported, so the choice
has to be made first.  We look for a GPU through the CUDA driver with ``ctypes``
(``cuInit`` and ``cuDeviceGetCount`` on ``libcuda``), which does not import numba.

The compiler.  Which compiler turns the lessons' kernels into GPU code: numba-cuda (the default) or numba-cuda-mlir.

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

import ctypes
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import types
from functools import lru_cache
from typing import Any

SIMULATOR_ENV = "NUMBA_ENABLE_CUDASIM"
GPU = "gpu"
SIMULATOR = "simulator"


class BackendError(RuntimeError):
    """The CUDA backend cannot be set up the way this series needs it."""


def _env_requests_simulator(value: str | None) -> bool | None:
    """How numba itself reads the variable: unset or empty means "not asked"."""
    if value is None or value.strip() == "":
        return None
    return value.strip() != "0"


@lru_cache(maxsize=1)
def gpu_available() -> bool:
    """True when the CUDA driver loads, initialises and reports at least one device."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            driver = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if driver.cuInit(0) != 0:
                return False
            count = ctypes.c_int(0)
            if driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
                return False
        except AttributeError:  # a stub library without the driver API
            return False
        return count.value > 0
    return False


def choose_backend() -> str:
    """Decide between the GPU and the simulator, and tell numba before it loads.

    An explicit ``NUMBA_ENABLE_CUDASIM`` set by the user wins.  Otherwise the
    simulator is chosen exactly when no usable GPU is found.  If numba is already
    imported with the other choice, a :class:`BackendError` says how to recover.
    """
    asked = _env_requests_simulator(os.environ.get(SIMULATOR_ENV))
    want_simulator = (not gpu_available()) if asked is None else asked

    if "numba" in sys.modules:
        from numba.core import config

        loaded_simulator = bool(config.ENABLE_CUDASIM)
        if loaded_simulator != want_simulator:
            loaded = SIMULATOR if loaded_simulator else GPU
            wanted = SIMULATOR if want_simulator else GPU
            raise BackendError(
                f"numba was imported before helpers and is using the {loaded} backend, "
                f"but this machine needs the {wanted} backend. Restart the kernel "
                "(Kernel > Restart) and run `import helpers` before anything imports numba."
            )
        return SIMULATOR if loaded_simulator else GPU

    os.environ[SIMULATOR_ENV] = "1" if want_simulator else "0"
    return SIMULATOR if want_simulator else GPU


_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def uncoloured(text: object) -> str:
    """``text`` without terminal colour codes (Numba and nvidia-smi colour their messages on some terminals)."""
    return _COLOUR.sub("", str(text))


def check_numba_cuda() -> None:
    """Fail clearly unless ``numba.cuda`` is NVIDIA's numba-cuda package (or numba-cuda-mlir, when asked for)."""
    from numba import cuda

    if COMPILER[0]:
        return
    if getattr(cuda, "implementation", None) != "NVIDIA":
        raise BackendError(
            "numba.cuda is numba's old built-in CUDA target, not NVIDIA's numba-cuda. "
            "Install the project's pinned dependencies: `make lab` does it, or "
            "`pip install -e .` (add `numba-cuda[cu12]` for a CUDA 12 driver)."
        )


COMPILER: list[str] = [""]
"""The compiler's name and version when it is not the default numba-cuda (see :mod:`.compiler`)."""


def is_simulator() -> bool:
    """True when numba runs kernels in the CUDA simulator."""
    if COMPILER[0]:
        return False  # numba-cuda-mlir has no simulator
    from numba.core import config

    return bool(config.ENABLE_CUDASIM)


# --- the compiler: numba-cuda, or numba-cuda-mlir answering `import numba` -------------------

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
        return ""  # a stand-in: numba's core modules live in two places there
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
        if not home:
            return _core_stand_in()
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


def _core_stand_in() -> types.ModuleType:
    """``numba.core``: its modules are numba-cuda-mlir's ``numba_cuda.core.<x>`` or ``numba_cuda.<x>``."""
    core = importlib.import_module("numba_cuda_mlir.numba_cuda.core")
    module = types.ModuleType("numba.core", "numba-cuda-mlir's modules standing in for numba.core")
    module.__path__ = []  # `import numba.core.types` is asked of the finder, which knows both homes

    def __getattr__(name: str) -> Any:  # `from numba.core import types`
        if hasattr(core, name):
            return getattr(core, name)
        try:
            return importlib.import_module(f"numba.core.{name}")
        except ImportError as exc:
            raise AttributeError(f"numba-cuda-mlir has no numba.core.{name}") from exc

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
