"""Choose Numba's CUDA backend -- a real GPU or the CUDA simulator -- before numba loads.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when it is first imported, so the choice
has to be made first.  We look for a GPU through the CUDA driver with ``ctypes``
(``cuInit`` and ``cuDeviceGetCount`` on ``libcuda``), which does not import numba.
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import lru_cache

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
