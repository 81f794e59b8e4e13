"""Clear errors for bad input, before a kernel runs or a count is taken.

Numba accepts a host NumPy array where a device array is expected and silently
copies it to the GPU and back on every launch; a non-contiguous view or a length
mismatch can read out of bounds or give a count that means nothing.  These checks
name the argument and the problem instead.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np


def kernel_function(kernel: Any) -> Any:
    """The Python function a kernel was made from: ``py_func`` of a CUDA dispatcher, ``fn`` of the
    simulator's kernel, or ``kernel`` itself when it is neither (a plain function)."""
    return getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel


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


def memory_range(name: str, array: Any) -> tuple[int, int]:
    """The ``[first, last)`` byte addresses ``array`` occupies (host addresses in the simulator)."""
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is None:
        try:
            interface = array.__array_interface__  # NumPy, and the simulator's arrays (they wrap NumPy)
        except AttributeError as exc:
            raise TypeError(f"`{name}` exposes no array interface to read its address from") from exc
    start = int(interface["data"][0])
    return start, start + int(array.size) * np.dtype(array.dtype).itemsize


def check_no_aliasing(inputs: dict[str, Any], outputs: dict[str, Any], *, in_place: bool = False) -> None:
    """Raise ``ValueError`` naming both arrays when an output shares memory with an input.

    Writing an output that is also an input destroys the input (``t1=a`` overwrites
    ``a``), and a partial overlap (``x[1:]`` against ``x[:-1]``) makes threads read
    elements that other threads are overwriting.  With ``in_place`` an output may be
    *exactly* one of the inputs (``x = x * k`` elementwise is safe), never a partial overlap.
    """
    ranges = {name: memory_range(name, array) for name, array in {**inputs, **outputs}.items()}
    for out_name in outputs:
        o_start, o_end = ranges[out_name]
        for in_name in inputs:
            i_start, i_end = ranges[in_name]
            if o_start >= i_end or i_start >= o_end or o_start == o_end or i_start == i_end:
                continue  # disjoint (or empty)
            if (o_start, o_end) == (i_start, i_end):
                if in_place:
                    continue
                raise ValueError(
                    f"`{out_name}` and `{in_name}` are the same array: writing `{out_name}` would overwrite "
                    f"the input `{in_name}`. Give `{out_name}` its own array, e.g. "
                    f"`{out_name} = cuda.device_array_like({in_name})`."
                )
            raise ValueError(
                f"`{out_name}` overlaps `{in_name}` in memory (views of one array?): threads would read "
                f"elements of `{in_name}` that other threads are overwriting. Use separate arrays."
            )


def require_scalar(name: str, value: Any, *, nonzero: bool = False) -> float:
    """Return ``value`` as a Python float if it is one finite real number; else raise naming the problem."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        got = "None" if value is None else type(value).__name__
        raise TypeError(f"`{name}` must be a number (an int or a float), got {got}.")
    number = float(value)
    if not np.isfinite(number):
        raise ValueError(f"`{name}` is {number}: every result would be NaN or infinite. Pass a finite number.")
    if nonzero and number == 0:
        raise ValueError(f"`{name}` is 0: dividing by it makes every result infinite. Pass a non-zero number.")
    return number


def check_elementwise(arrays: dict[str, Any], *, dtype: Any | None = None, floating: bool = True,
                      outputs: Iterable[str] = ()) -> int:
    """Validate device arrays for an elementwise pipeline and return their common length.

    Each array must be a 1-D, C-contiguous device array; all must have the same
    length (at least one element) and the same dtype (``dtype`` when given), a
    floating-point one unless ``floating`` is False (integer arrays would truncate
    every quotient).  The arrays named in ``outputs`` must not share memory with
    any of the others (see :func:`check_no_aliasing`).
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
    if floating:
        for name, dt in dtypes.items():
            if dt.kind != "f":
                raise TypeError(
                    f"`{name}` is {dt}: these kernels compute in floating point, and storing into {dt} "
                    f"would silently truncate every result. Use float32 (or float64), e.g. "
                    f"`cuda.to_device(host.astype(np.float32))`."
                )
    expected = np.dtype(dtype) if dtype is not None else next(iter(dtypes.values()))
    wrong = {name: dt for name, dt in dtypes.items() if dt != expected}
    if wrong:
        listing = ", ".join(f"{name}: {dt}" for name, dt in wrong.items())
        raise TypeError(f"expected every array to be {expected}, but got {listing}.")
    written = [name for name in outputs if name in arrays]
    check_no_aliasing({k: v for k, v in arrays.items() if k not in written}, {k: arrays[k] for k in written})
    return n


def require_whole(name: str, value: Any, *, low: int = 1, high: int | None = None) -> int:
    """Return ``value`` as an int if it is a whole number in ``[low, high]``; else raise naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        got = "None" if value is None else f"{value!r} ({type(value).__name__})"
        raise TypeError(f"`{name}` must be a whole number, got {got}.")
    number = int(value)
    if number < low or (high is not None and number > high):
        span = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"`{name}` must be {span}, got {number}.")
    return number


def require_flag(name: str, value: Any) -> bool:
    """Return ``value`` if it is True or False; a string such as "no" would be read as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False, got {value!r} ({type(value).__name__}).")
    return bool(value)


def require_array(name: str, array: Any, *, shape: tuple[int, ...] | None = None, ndim: int | None = None,
                  dtype: Any | None = None, floating: bool = False) -> tuple[int, ...]:
    """Check one device array's place, dimensions, shape and dtype; return its shape."""
    require_device_array(name, array)
    got = tuple(int(s) for s in array.shape)
    if ndim is not None and len(got) != ndim:
        raise ValueError(f"`{name}` must have {ndim} dimensions, got shape {got}.")
    if shape is not None and got != tuple(shape):
        raise ValueError(f"`{name}` must have shape {tuple(shape)}, got {got}.")
    kind = np.dtype(array.dtype)
    if dtype is not None and kind != np.dtype(dtype):
        raise TypeError(f"`{name}` must be {np.dtype(dtype)}, got {kind}.")
    if floating and kind.kind != "f":
        raise TypeError(f"`{name}` is {kind}: storing into it would truncate every value. Use float32.")
    return got
