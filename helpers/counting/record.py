"""What both counting engines share: a launch's arguments (:class:`LaunchArgs`, described once, by
:mod:`helpers.launch_hook`), a count (:class:`ElementCounts`, which :meth:`LaunchArgs.traffic` turns into bytes per
array), and a refusal (:class:`CannotAttribute` and its kinds), worded here once."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from math import prod
from typing import Any, Iterator, Sequence

import numpy as np

DATA_INDEX = "its address depends on a value loaded from memory (a data-dependent index such as x[idx[i]])"
DATA_BRANCH = "whether it runs depends on a value loaded from memory (a data-dependent branch such as if x[i] > 0)"
"""Why an access cannot be counted, in the words both the per-thread count and the instruction view use."""


class CannotAttribute(Exception):
    """The static counter cannot say what a launch reads and writes (the message says why)."""


class OutOfBounds(CannotAttribute):
    """A thread of the launch would read or write past the end of an array (the message names it)."""

    @classmethod
    def of(cls, kernel: str, array: str, element: int, size: int, threads: int, block: int) -> "OutOfBounds":
        return cls(f"{kernel}: a thread would access {array}[{element}], outside the array (size {size}); "
                   f"{threads} thread(s) of block {block} do so (a bounds guard is missing or wrong)")


class DataDependentBranch(CannotAttribute):
    """Whether an access runs depends on a value loaded from memory (``if x[i] > 0``): the dynamic engine counts it."""

    @classmethod
    def of(cls, kernel: str) -> "DataDependentBranch":
        return cls(f"cannot count {kernel}: {DATA_BRANCH}")


class LinkedCall(CannotAttribute):
    """The kernel calls a function that the compiler did not inline (CUDA C linked with ``link=``)."""

    @classmethod
    def of(cls, kernel: str, callee: str, linked: bool) -> "LinkedCall":
        if linked:
            why = (f"it calls `{callee}`, a function compiled from CUDA C (linked with `link=`), whose code the "
                   "static counter cannot see, so it cannot say what that function reads and writes")
        elif callee.startswith("%"):
            why = f"it calls a function through a pointer ({callee}), which the static counter does not follow"
        else:
            why = (f"it calls `{callee}`, a device function the compiler did not inline, which the static "
                   "counter does not follow")
        return cls(f"cannot count {kernel}: {why}")


_counting_copies: list[int] = [0]


@contextmanager
def copies_for_a_count() -> Iterator[None]:
    """Mark the copies made inside as the counter's own, which a watcher of the caller's copies (the grader's) skips."""
    _counting_copies[0] += 1
    try:
        yield
    finally:
        _counting_copies[0] -= 1


def copying_for_a_count() -> bool:
    """True inside :func:`copies_for_a_count`."""
    return _counting_copies[0] > 0


def short_number(x: float) -> str:
    """``16`` for a whole number, ``10.67`` otherwise: how a count per element is printed."""
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


def summed(items: str, attribute: str, doc: str | None = None) -> property:
    """A property: ``attribute`` summed over ``self.<items>`` (a list, or a method that returns one)."""
    def total(self: Any) -> Any:
        found = getattr(self, items)
        return sum(getattr(item, attribute) for item in (found() if callable(found) else found))

    return property(total, doc=doc)


def is_array(value: Any) -> bool:
    """True for an array argument (NumPy, a device array, real or simulated); False for a scalar."""
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, np.generic)


@dataclass(frozen=True)
class ArrayLayout:
    """How a compiler passes an array to a kernel: the PTX parameters it is flattened into."""

    fixed: int  # parameters before shape[ndim] and strides[ndim]
    data: tuple[int, ...]  # those that hold the data pointer
    size_at: int | None  # the one that holds the element count (None: none does)
    itemsize_at: int | None
    strides_in_elements: bool

    def n_params(self, ndim: int | None) -> int:
        """Parameters an argument takes: an array of ``ndim`` dimensions, or (None) a scalar's one."""
        return 1 if ndim is None else self.fixed + 2 * ndim

    def params(self, pointer: int, size: int, itemsize: int, shape: tuple[int, ...],
               strides: tuple[int, ...]) -> list[int]:
        """The parameters' values for an array whose data is at ``pointer`` (other fixed ones: 0)."""
        known = {**dict.fromkeys(self.data, pointer), self.size_at: size, self.itemsize_at: itemsize}
        fixed = [known.get(k, 0) for k in range(self.fixed)]  # a None key (no such parameter) is never asked for
        steps = [s // itemsize for s in strides] if self.strides_in_elements else list(strides)
        return fixed + list(shape) + steps


NUMBA_CUDA_ARRAYS = ArrayLayout(5, (4,), 2, 3, False)
"""meminfo, parent, nitems, itemsize, data, shape[ndim], strides[ndim] (in bytes)."""
MLIR_ARRAYS = ArrayLayout(3, (0, 1), None, None, True)
"""An MLIR memref: allocated and aligned pointers, offset, shape[ndim], strides[ndim] (in elements)."""


def array_layout(ptx_params: int, ndims: Sequence[int | None], refuse: bool = True) -> ArrayLayout:
    """The layout under which arguments of these dimensions (None: a scalar) take ``ptx_params`` parameters;
    where none does, ``CannotAttribute`` (or numba-cuda's, if not ``refuse``: the PTX declares more)."""
    implied = {layout: sum(layout.n_params(d) for d in ndims) for layout in (NUMBA_CUDA_ARRAYS, MLIR_ARRAYS)}
    found = next((layout for layout, count in implied.items() if count == ptx_params), None)
    if found is not None or not refuse:
        return found or NUMBA_CUDA_ARRAYS
    raise CannotAttribute(f"the PTX has {ptx_params} parameters but the argument types imply "
                          f"{implied[NUMBA_CUDA_ARRAYS]}")


@dataclass(frozen=True)
class ArgType:
    """A picklable description of one kernel argument's Numba type."""

    kind: str  # "array" or "scalar"
    dtype: str
    ndim: int = 0
    layout: str = "C"

    def to_numba(self) -> Any:
        from numba import types
        dtype = getattr(types, self.dtype)
        return types.Array(dtype, self.ndim, self.layout) if self.kind == "array" else dtype


_SCALAR_DTYPES = {bool: "boolean", int: "int64", float: "float64"}


@dataclass(frozen=True)
class ArgInfo:
    """One argument of one launch: what the counters need to know about it."""

    name: str
    is_array: bool
    dtype: str  # Numba's name: "float32", "int64", "boolean", ...
    shape: tuple[int, ...] = ()
    itemsize: int = 0
    strides: tuple[int, ...] = ()
    value: bool | int | float | None = None  # a scalar's value (known at the launch)
    host: str | None = None  # Numba copies it from the host: "array" (a NumPy array) or its hint ("In", "Out", "InOut")

    @property
    def copied_in(self) -> bool:  # host -> device before the launch
        return self.host in ("array", "In", "InOut")

    @property
    def copied_out(self) -> bool:  # device -> host after it
        return self.host in ("array", "Out", "InOut")

    @property
    def contiguous(self) -> bool:
        """C-contiguous, as NumPy and Numba decide it (a dimension of one element has any stride)."""
        c_order = _c_strides(self.shape, self.itemsize)
        return not self.is_array or self.size == 0 or all(
            extent == 1 or stride == step for extent, stride, step in zip(self.shape, self.strides, c_order))

    @property
    def size(self) -> int:
        return prod(self.shape) if self.is_array else 1

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def argtype(self) -> ArgType:
        return ArgType("array", self.dtype, len(self.shape), "C") if self.is_array else ArgType("scalar", self.dtype)

    @classmethod
    def of(cls, name: str, value: Any, host: str | None = None) -> "ArgInfo":
        """Describe one argument value (``TypeError``, naming it, for what a kernel cannot take); with ``host``,
        Numba copies it from the host and the value is the host array itself."""
        if value is None:
            raise TypeError(f"`{name}` is None: pass an array or a number")
        if is_array(value):
            interface = getattr(value, "__cuda_array_interface__", None)
            try:
                dtype = np.dtype(value.dtype)
            except TypeError:  # e.g. a torch tensor: its CUDA array interface names the NumPy type
                if interface is None:
                    raise TypeError(f"`{name}` has a dtype ({value.dtype}) a kernel cannot take") from None
                dtype = np.dtype(interface["typestr"])
            shape = tuple(int(s) for s in value.shape)
            strides = (interface.get("strides") if interface else getattr(value, "strides", None)) or \
                _c_strides(shape, dtype.itemsize)  # none given: C order
            return cls(name, True, _numba_name(dtype), shape, dtype.itemsize, tuple(int(s) for s in strides), host=host)
        if isinstance(value, np.generic):
            dtype = np.dtype(type(value))
            return cls(name, False, _numba_name(dtype), itemsize=dtype.itemsize, value=value.item())
        if type(value) in _SCALAR_DTYPES:
            return cls(name, False, _SCALAR_DTYPES[type(value)], itemsize=8, value=value)
        raise TypeError(f"`{name}` is a {type(value).__name__}; a kernel takes arrays and numbers")


def _numba_name(dtype: np.dtype) -> str:
    return "boolean" if dtype == np.bool_ else str(dtype)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> list[int]:
    return [itemsize * prod(shape[k + 1:]) for k in range(len(shape))]


@dataclass(frozen=True)
class LaunchArgs:
    """Every argument of one launch, in order: built once (by the ledger) and passed down."""

    args: tuple[ArgInfo, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, values: Sequence[Any], names: Sequence[str] | None = None) -> "LaunchArgs":
        names = [f"arg{i}" for i in range(len(values))] if names is None else names
        if len(names) != len(values):
            raise ValueError(f"got {len(names)} names for {len(values)} arguments")
        return cls(tuple(ArgInfo.of(name, value) for name, value in zip(names, values)))

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.args]

    @property
    def argtypes(self) -> tuple[ArgType, ...]:
        return tuple(a.argtype for a in self.args)

    def traffic(self, counts: ElementCounts) -> list[ArrayTraffic]:
        """An engine's element counts in bytes: one row per array name, in argument order (passed twice: one row)."""
        rows: dict[str, ArrayTraffic] = {}
        for i, info in enumerate(self.args):
            if not info.is_array:
                continue
            row = rows.setdefault(info.name, ArrayTraffic(info.name, info.itemsize, info.size))
            row.bytes_read += counts.loads.get(i, 0) * info.itemsize
            row.bytes_written += counts.stores.get(i, 0) * info.itemsize
        return list(rows.values())

    def host_copies(self) -> list[HostCopy]:
        """The copies Numba makes around the launch, one per argument it copies from the host."""
        return [HostCopy(a.name, a.nbytes * a.copied_in, a.nbytes * a.copied_out) for a in self.args if a.host]


@dataclass
class ElementCounts:
    """Distinct elements loaded and stored per array argument (by index), summed over threads: both engines' count."""

    loads: dict[int, int] = field(default_factory=dict)
    stores: dict[int, int] = field(default_factory=dict)

    def add(self, other: "ElementCounts", times: int = 1) -> None:
        for mine, theirs in ((self.loads, other.loads), (self.stores, other.stores)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v * times

    def to_json(self) -> dict[str, dict[str, int]]:
        return asdict(self)  # JSON writes the argument indices as strings: from_json reads them back

    @classmethod
    def from_json(cls, data: dict[str, dict[str, int]]) -> "ElementCounts":
        return cls(*({int(i): n for i, n in data[side].items()} for side in ("loads", "stores")))


@dataclass
class ArrayTraffic:
    """Bytes one launch moved between one array and device memory."""

    name: str
    itemsize: int
    size: int
    bytes_read: int = 0
    bytes_written: int = 0


@dataclass
class HostCopy:
    """Bytes Numba copied between one host array and the device around one launch."""

    name: str
    to_device: int = 0  # bytes copied host -> device before the launch
    to_host: int = 0  # bytes copied device -> host after it


@dataclass
class Traffic:
    """Bytes one launch read from and wrote to each array argument: the count both engines produce."""

    kernel: str
    method: str  # "ptx" or "simulator"
    arrays: list[ArrayTraffic] = field(default_factory=list)  # one row per array argument name (LaunchArgs.traffic)

    @property
    def read(self) -> dict[str, int]:
        """Bytes read, by array name."""
        return {a.name: a.bytes_read for a in self.arrays}

    bytes_read, bytes_written = summed("arrays", "bytes_read"), summed("arrays", "bytes_written")

    def per_array(self) -> dict[str, tuple[int, int]]:
        """``{array: (bytes read, bytes written)}`` for every array argument."""
        return {a.name: (a.bytes_read, a.bytes_written) for a in self.arrays}
