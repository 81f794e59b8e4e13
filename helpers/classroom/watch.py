"""Watching what a student's function does besides computing in its kernels.

The inputs of an exercise are already on the device, so a solution has no reason to
move n elements any other way than through its own kernels.  Two watches run while
the student's function runs, on a GPU and in the simulator alike, for the duration of a
``with`` block (Numba is restored afterwards):

* :class:`Copies` records every copy the function makes: from the host
  (``cuda.to_device``, ``out.copy_to_device(host)``, ``out[:] = host``), to the host
  (``x.copy_to_host()``), and *between device arrays* (``out.copy_to_device(tmp)``,
  ``cuda.to_device(tmp, to=out)``, ``out[:] = tmp``, or a fill ``out[:] = 0``).  None of
  them is a kernel launch, so the ledger does not see them; the grader does, through
  this record, by wrapping Numba's copy functions.  ``cuda.to_device`` of a device array
  is not recorded: on a GPU it hands back the same array, without a copy.
* :class:`Launches` records each kernel launch: the kernel, its arguments and its
  grid, so that the grader can compile it for a GPU while the lesson runs in the
  simulator, and can tell a grid written into the code from one computed from n.
  It subscribes to :mod:`helpers.launch_hook`, as the ledger does.
"""

from __future__ import annotations

import functools
from contextlib import ExitStack
from dataclasses import dataclass
from math import prod
from typing import Any, Callable, Sequence

import numpy as np
from numba import cuda

from ..backend import is_simulator
from ..counting import copying_for_a_count
from ..launch_hook import KernelCall, Proceed, on_launch

TO_DEVICE, TO_HOST, ON_DEVICE = "to device", "to host", "on device"


@dataclass
class Copy:
    """One copy the student's function made."""

    direction: str  # TO_DEVICE (from the host), TO_HOST, or ON_DEVICE (from another device array, or a fill)
    elements: int
    how: str  # the call, as the student wrote it: "out.copy_to_device(...)", "out[...] = ..."
    target: str | None = None  # the exercise's array written (to/on device) or read (to host), when it is one
    source: str | None = None  # on the device: the exercise's array copied from, when it is one


def _array_classes() -> list[type]:
    """The device array classes whose copy methods are watched."""
    if is_simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return [FakeCUDAArray]
    from numba.cuda.cudadrv.devicearray import DeviceNDArray, DeviceNDArrayBase

    return [DeviceNDArrayBase, DeviceNDArray]


def _is_device(obj: Any) -> bool:
    return isinstance(obj, tuple(_array_classes())) or hasattr(obj, "__cuda_array_interface__")


@functools.lru_cache(maxsize=1)
def _simulator_kernels() -> Any:
    from numba.cuda.simulator import kernel

    return kernel


def _in_a_simulated_kernel() -> bool:
    """True while the simulator runs a kernel: its threads' stores are the kernel's, not copies."""
    return is_simulator() and _simulator_kernels()._get_kernel_context() is not None


class _Wrapping:
    """Replace attributes for the length of a ``with`` block; nested calls record nothing."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        self._depth = 0

    def _wrap(self, owner: Any, attribute: str, make: Callable[[Any], Callable[..., Any]]) -> None:
        original = getattr(owner, attribute)
        self._saved.append((owner, attribute, original))
        setattr(owner, attribute, functools.wraps(original)(make(original)))

    def _nested(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._depth += 1
        try:
            return call(*args, **kwargs)
        finally:
            self._depth -= 1

    def __exit__(self, *exc: object) -> None:
        while self._saved:
            owner, attribute, original = self._saved.pop()
            setattr(owner, attribute, original)


class Copies(_Wrapping):
    """Context manager: the copies made inside the block (from, to and on the device).

    ``names`` maps ``id()`` of the arrays handed to the student to their names, so
    that a copy into ``out`` is reported as such.
    """

    def __init__(self, names: dict[int, str] | None = None) -> None:
        super().__init__()
        self.names = dict(names or {})
        self.copies: list[Copy] = []

    def _name(self, array: Any) -> str | None:
        return self.names.get(id(array))

    def _record(self, direction: str, elements: int, how: str, target: Any, source: Any = None) -> None:
        if self._depth == 0 and not copying_for_a_count():  # the counter's own copies are not the student's
            self.copies.append(Copy(direction, int(elements), how, self._name(target), self._name(source)))

    def __enter__(self) -> "Copies":
        self._wrap(cuda, "to_device", self._to_device)
        for cls in _array_classes():
            if "copy_to_device" in cls.__dict__:
                self._wrap(cls, "copy_to_device", self._copy_to_device)
                self._wrap(cls, "copy_to_host", self._copy_to_host)
            if "__setitem__" in cls.__dict__:
                self._wrap(cls, "__setitem__", self._setitem)
        return self

    def _to_device(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(obj: Any, *args: Any, **kwargs: Any) -> Any:
            to = kwargs.get("to", args[2] if len(args) > 2 else None)
            if not _is_device(obj):
                self._record(TO_DEVICE, np.size(obj), "cuda.to_device(...)", to)
            elif to is not None:
                self._record(ON_DEVICE, obj.size, "cuda.to_device(..., to=...)", to, obj)
            return self._nested(original, obj, *args, **kwargs)

        return wrapped

    def _copy_to_device(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(array: Any, ary: Any, *args: Any, **kwargs: Any) -> Any:
            how = f"{self._name(array) or 'an array'}.copy_to_device(...)"
            if _is_device(ary):
                self._record(ON_DEVICE, ary.size, how, array, ary)
            else:
                self._record(TO_DEVICE, np.size(ary), how, array)
            return self._nested(original, array, ary, *args, **kwargs)

        return wrapped

    def _copy_to_host(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(array: Any, *args: Any, **kwargs: Any) -> Any:
            self._record(TO_HOST, array.size, f"{self._name(array) or 'an array'}.copy_to_host()", array)
            return self._nested(original, array, *args, **kwargs)

        return wrapped

    def _setitem(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(array: Any, key: Any, value: Any) -> Any:
            if self._depth == 0 and not _in_a_simulated_kernel():
                try:
                    elements = np.broadcast_to(np.int8(0), array.shape)[key].size
                except (IndexError, TypeError, ValueError):
                    elements = 0  # the assignment itself will say what is wrong with the index
                how = f"{self._name(array) or 'an array'}[...] = ..."
                if _is_device(value) or np.ndim(value) == 0:  # another device array, or a number filled in
                    self._record(ON_DEVICE, elements, how, array, value if _is_device(value) else None)
                else:
                    self._record(TO_DEVICE, elements, how, array)
            return self._nested(original, array, key, value)

        return wrapped

    def from_host(self, at_least: int) -> list[Copy]:
        """Copies to the device, from the host, of ``at_least`` elements or more."""
        return [c for c in self.copies if c.direction == TO_DEVICE and c.elements >= at_least]

    def to_host(self, at_least: int) -> list[Copy]:
        """Copies to the host of ``at_least`` elements or more."""
        return [c for c in self.copies if c.direction == TO_HOST and c.elements >= at_least]

    def on_device(self, at_least: int) -> list[Copy]:
        """Copies between device arrays (and fills) of ``at_least`` elements or more."""
        return [c for c in self.copies if c.direction == ON_DEVICE and c.elements >= at_least]


@dataclass
class Launched:
    """One kernel launch the student's function made."""

    kernel: Any  # the kernel object (a simulator kernel or a dispatcher)
    args: Sequence[Any]
    grid: tuple[int, ...]
    block: tuple[int, ...]

    @property
    def name(self) -> str:
        py_func = getattr(self.kernel, "py_func", None) or getattr(self.kernel, "fn", None)
        return getattr(py_func, "__name__", "the kernel")

    @property
    def threads(self) -> int:
        return prod(self.grid) * prod(self.block)


class Launches:
    """Context manager: every kernel launched inside the block, recorded before it runs, as it was passed.

    It subscribes to :mod:`helpers.launch_hook`: device functions called inside a simulated kernel
    are part of that kernel, not launches.
    """

    def __init__(self) -> None:
        self.launched: list[Launched] = []
        self._subscription = ExitStack()

    def __enter__(self) -> "Launches":
        self._subscription.enter_context(on_launch(self._seen))
        return self

    def __exit__(self, *exc: object) -> None:
        self._subscription.close()

    def _seen(self, call: KernelCall, proceed: Proceed) -> Any:
        self.launched.append(Launched(call.kernel, call.given, call.grid, call.block))
        return proceed()
