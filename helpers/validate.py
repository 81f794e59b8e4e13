"""Clear errors for bad input, before a kernel runs or a count is taken.

Numba accepts a host NumPy array where a device array is expected and silently
copies it to the GPU and back on every launch; a non-contiguous view or a length
mismatch can read out of bounds or give a count that means nothing.  These checks
name the argument and the problem instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def is_device_array(obj: Any) -> bool:
    """True for a Numba device array (real or simulated) or any CUDA-array-interface object."""
    if isinstance(obj, np.ndarray):
        return False
    # Real device arrays expose the CUDA Array Interface; the simulator's mark themselves.
    return hasattr(obj, "__cuda_array_interface__") or bool(getattr(obj, "__cuda_ndarray__", False))


def is_c_contiguous(array: Any) -> bool:
    """C-contiguity for device arrays (real or simulated) and NumPy arrays alike."""
    if hasattr(array, "is_c_contiguous"):
        return bool(array.is_c_contiguous())
    return bool(array.flags.c_contiguous)


def require_device_array(name: str, array: Any) -> None:
    """Raise ``TypeError`` unless ``array`` lives on the device."""
    if isinstance(array, np.ndarray):
        raise TypeError(
            f"`{name}` is a host NumPy array. Numba would copy it to the GPU and back on "
            f"every launch, hiding two extra trips; copy it once with "
            f"`{name} = cuda.to_device({name})`."
        )
    if not is_device_array(array):
        raise TypeError(f"`{name}` must be a device array, got {type(array).__name__}.")


def check_elementwise(arrays: dict[str, Any], *, dtype: Any | None = None) -> int:
    """Validate device arrays for an elementwise pipeline and return their common length.

    Each array must be a 1-D, C-contiguous device array; all must have the same
    length (at least one element) and the same dtype (``dtype`` when given).
    """
    if not arrays:
        raise ValueError("no arrays were given")
    for name, array in arrays.items():
        require_device_array(name, array)
    lengths = {name: int(array.size) for name, array in arrays.items()}
    for name, array in arrays.items():
        if len(array.shape) != 1:
            raise ValueError(f"`{name}` has shape {tuple(array.shape)}; these kernels take 1-D arrays.")
        if not is_c_contiguous(array):
            raise ValueError(
                f"`{name}` is not contiguous (a strided view such as x[::2]); the kernels "
                f"assume neighbouring threads read neighbouring elements. Pass a contiguous copy."
            )
    if len(set(lengths.values())) > 1:
        listing = ", ".join(f"{name}: {n}" for name, n in lengths.items())
        raise ValueError(f"arrays have different lengths ({listing}); they must all match.")
    n = next(iter(lengths.values()))
    if n == 0:
        raise ValueError("the arrays are empty (n = 0): there is nothing to compute or to count.")
    dtypes = {name: np.dtype(array.dtype) for name, array in arrays.items()}
    expected = np.dtype(dtype) if dtype is not None else next(iter(dtypes.values()))
    wrong = {name: dt for name, dt in dtypes.items() if dt != expected}
    if wrong:
        listing = ", ".join(f"{name}: {dt}" for name, dt in wrong.items())
        raise TypeError(f"expected every array to be {expected}, but got {listing}.")
    return n
