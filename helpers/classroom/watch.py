"""Watching the copies between host and device while a student's function runs.

The inputs of an exercise are already on the device, so a solution has no reason
to copy n elements from the host: a function that computes the result with NumPy
and copies it into ``out`` (directly, or through a device copy kernel) is doing
the work on the host.  :class:`HostCopies` records every such copy, on a GPU and
in the simulator alike, by wrapping Numba's copy functions for the duration of a
``with`` block (and restoring them afterwards).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from numba import cuda

from ..backend import is_simulator
from ..counting import copying_for_a_count


@dataclass
class Copy:
    """One copy the student's function made."""

    direction: str  # "to device" or "to host"
    elements: int
    how: str  # the call, as the student wrote it: "out.copy_to_device(...)", "cuda.to_device(...)"
    target: str | None = None  # the exercise's array written (to device) or read (to host), when it is one


def _array_classes() -> list[type]:
    if is_simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return [FakeCUDAArray]
    from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase

    return [DeviceNDArrayBase]


def _is_device(obj: Any) -> bool:
    return isinstance(obj, tuple(_array_classes())) or hasattr(obj, "__cuda_array_interface__")


@dataclass
class HostCopies:
    """Context manager: the copies between host and device made inside the block.

    ``names`` maps ``id()`` of the arrays handed to the student to their names, so
    that a copy into ``out`` is reported as such.
    """

    names: dict[int, str] = field(default_factory=dict)
    copies: list[Copy] = field(default_factory=list)
    _saved: list[tuple[Any, str, Any]] = field(default_factory=list)
    _depth: int = 0

    def _record(self, direction: str, elements: int, how: str, target: Any) -> None:
        if self._depth == 0 and not copying_for_a_count():  # the counter's own copies are not the student's
            self.copies.append(Copy(direction, int(elements), how, self.names.get(id(target))))

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

    def __enter__(self) -> "HostCopies":
        def to_device(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(obj: Any, *args: Any, **kwargs: Any) -> Any:
                if not _is_device(obj):
                    target = kwargs.get("to", args[2] if len(args) > 2 else None)
                    self._record("to device", np.size(obj), "cuda.to_device(...)", target)
                return self._nested(original, obj, *args, **kwargs)

            return wrapped

        def copy_to_device(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(array: Any, ary: Any, *args: Any, **kwargs: Any) -> Any:
                if not _is_device(ary):
                    name = self.names.get(id(array), "an array")
                    self._record("to device", np.size(ary), f"{name}.copy_to_device(...)", array)
                return self._nested(original, array, ary, *args, **kwargs)

            return wrapped

        def copy_to_host(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(array: Any, *args: Any, **kwargs: Any) -> Any:
                name = self.names.get(id(array), "an array")
                self._record("to host", array.size, f"{name}.copy_to_host()", array)
                return self._nested(original, array, *args, **kwargs)

            return wrapped

        self._wrap(cuda, "to_device", to_device)
        for cls in _array_classes():
            self._wrap(cls, "copy_to_device", copy_to_device)
            self._wrap(cls, "copy_to_host", copy_to_host)
        return self

    def __exit__(self, *exc: object) -> None:
        while self._saved:
            owner, attribute, original = self._saved.pop()
            setattr(owner, attribute, original)

    def from_host(self, at_least: int) -> list[Copy]:
        """Copies to the device of ``at_least`` elements or more."""
        return [c for c in self.copies if c.direction == "to device" and c.elements >= at_least]

    def to_host(self, at_least: int) -> list[Copy]:
        """Copies to the host of ``at_least`` elements or more."""
        return [c for c in self.copies if c.direction == "to host" and c.elements >= at_least]
