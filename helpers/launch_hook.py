"""The one place that watches Numba's kernel launches: the ledger, the graph checks and the grader subscribe.

``with on_launch(subscriber):`` calls ``subscriber(call, proceed)`` for every kernel launch made inside
the block, on a GPU (Numba's ``CUDADispatcher.call``; under numba-cuda-mlir, ``_ArgMarshaller.__call__``,
where its launches pass) and in the simulator (``FakeCUDAKernel.__call__``) alike.  ``call`` is a :class:`KernelCall`: the kernel, its name, the arguments as they were passed,
the grid and block, the stream; and, read once on first use and shared by every subscriber, the
arguments' names as the calling code names them and their :class:`~helpers.counting.LaunchArgs`
record (dtypes, shapes, which ones Numba copies from the host).  ``proceed()`` runs the rest: the
subscribers that came before and then the launch itself, and returns what the launch returns.  A
subscriber may set ``call.args`` (what is launched) or, on a GPU, ``call.config`` (the launch
configuration) before it proceeds, or not proceed at all (a check that refuses, or that notes the
launch without running it).

The latest subscriber sees a launch first, as it was passed; Numba is patched while anyone subscribes
and restored when the last one leaves.  Device functions called inside a simulated kernel are part
of that kernel, not launches.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from types import FrameType
from typing import Any

import numpy as np

from .backend import COMPILER, is_simulator
from .counting import LaunchArgs, launch_dims
from .counting.record import ArgInfo

Proceed = Callable[[], Any]
Subscriber = Callable[["KernelCall", Proceed], Any]

HINTS = ("In", "InOut", "Out")  # InOut before Out: on a GPU an InOut is a kind of Out


def host_copy(value: Any) -> tuple[Any, str | None]:
    """An argument as the kernel sees it, and how Numba copies it from the host: ``(value, None)``
    for a device array or a number, ``(array, "array")`` for a host NumPy array, ``(array, "In")``
    (or ``"Out"``, ``"InOut"``) for a host array in a ``cuda.In``/``Out``/``InOut`` hint."""
    from numba import cuda  # numba loads after helpers chose the backend

    if isinstance(value, np.ndarray):
        return value, "array"
    for hint in HINTS:
        if isinstance(value, getattr(cuda, hint)):
            return np.asarray(value.value), hint
    return value, None


@dataclass(eq=False)
class KernelCall:
    """One kernel launch, as every subscriber sees it (see the module's description)."""

    kernel: Any  # the dispatcher (GPU) or the simulator's kernel
    name: str
    given: tuple[Any, ...]  # the arguments as the caller passed them
    grid: tuple[int, ...]
    block: tuple[int, ...]
    stream: Any  # a GPU stream; in the simulator, what the launch gave as its stream (None: none)
    config: Any = None  # on a GPU, Numba's launch configuration, which a subscriber may replace
    args: list[Any] = field(default_factory=list)  # what is launched: ``given`` unless a subscriber changed it
    _frame: FrameType | None = field(default=None, repr=False)  # the caller's, until the launch is done

    def __post_init__(self) -> None:
        self.args = self.args or list(self.given)

    @cached_property
    def hosts(self) -> list[tuple[Any, str | None]]:
        """:func:`host_copy` of each argument, read once."""
        return [host_copy(a) for a in self.given]

    @cached_property
    def plain(self) -> list[Any]:
        """The arguments as the kernel sees them: hints replaced by the host arrays they hold."""
        return [value for value, _ in self.hosts]

    @cached_property
    def names(self) -> list[str]:
        """Each argument's name in the code that launched it (``arg0``, ``arg1`` ... where it has none)."""
        return caller_names(self._frame, self.plain)

    @cached_property
    def record(self) -> LaunchArgs:
        """The arguments' record; ``TypeError`` naming the argument a kernel cannot take."""
        return LaunchArgs(tuple(ArgInfo.of(name, value, host) for name, (value, host) in zip(self.names, self.hosts)))


# --- naming the arguments ---------------------------------------------------------------


def _passes_through(frame: FrameType) -> bool:
    """Numba's frames and this module's sit between the launching code and the subscribers."""
    module = frame.f_globals.get("__name__", "")
    return module == __name__ or module.split(".")[0] in ("numba", "numba_cuda_mlir")


def _named_in(frame: FrameType, arg: Any) -> str | None:
    if isinstance(arg, (bool, int, float, np.number)):  # numbers: identity is ambiguous
        return None
    for scope in (frame.f_locals, frame.f_globals):
        match = next((k for k, v in scope.items() if v is arg and not k.startswith("_")), None)
        if match:
            return match
    return None


def caller_names(frame: FrameType | None, args: Sequence[Any]) -> list[str]:
    """Name each argument as the launching code names it (by identity).

    The names come from the innermost calling frame, outside Numba and this module, that holds any
    of the arguments under a name: a function that only passes a launch on (a checked launch, say)
    names none of them, and its caller's names are used.
    """
    while frame is not None and _passes_through(frame):
        frame = frame.f_back
    while frame is not None:
        found = [_named_in(frame, arg) for arg in args]
        if any(found):
            return [name or f"arg{i}" for i, name in enumerate(found)]
        frame = frame.f_back
    return [f"arg{i}" for i in range(len(args))]


# --- the one patch ------------------------------------------------------------------------

_subscribers: list[Subscriber] = []
_restore: list[Callable[[], None]] = []


def _dispatch(call: KernelCall, launch: Callable[[KernelCall], Any]) -> Any:
    """Hand the launch to every subscriber, the latest first; the last ``proceed`` launches it."""
    chain = list(reversed(_subscribers))

    def proceed_from(k: int) -> Any:
        if k == len(chain):
            return launch(call)
        return chain[k](call, lambda: proceed_from(k + 1))

    try:
        return proceed_from(0)
    finally:
        call._frame = None


def _patch_simulator() -> None:
    from numba.cuda.simulator import kernel as sim_kernel  # the simulator's module exists only there

    fake = sim_kernel.FakeCUDAKernel
    original_call, original_item = fake.__call__, fake.__getitem__

    def configured(kernel: Any, configuration: Any) -> Any:  # the simulator forgets the stream: note it
        has_stream = isinstance(configuration, tuple) and len(configuration) > 2
        kernel._launch_stream = configuration[2] if has_stream else None
        return original_item(kernel, configuration)

    def launched(kernel: Any, *args: Any) -> Any:
        if kernel._device or sim_kernel._get_kernel_context() is not None:
            return original_call(kernel, *args)
        call = KernelCall(kernel, kernel.fn.__name__, args, *launch_dims(kernel.grid_dim, kernel.block_dim),
                          getattr(kernel, "_launch_stream", None), _frame=sys._getframe(1))
        return _dispatch(call, lambda c: original_call(kernel, *c.args))

    fake.__call__, fake.__getitem__ = launched, configured
    _restore.append(lambda: (setattr(fake, "__call__", original_call), setattr(fake, "__getitem__", original_item)))


_in_numba = threading.local()  # inside Numba's own call for a launch (which may hand it to a specialised dispatcher)


def _numba_launches(original: Callable[..., Any], dispatcher: Any, args: Any, launch_config: Any) -> Any:
    _in_numba.depth = getattr(_in_numba, "depth", 0) + 1
    try:
        return original(dispatcher, args, launch_config)
    finally:
        _in_numba.depth -= 1


def _patch_gpu() -> None:
    from numba.cuda.dispatcher import CUDADispatcher  # the real dispatcher exists only on a GPU

    original = CUDADispatcher.call

    def launched(dispatcher: Any, args: Any, launch_config: Any) -> Any:
        if getattr(_in_numba, "depth", 0):  # the same launch, passed on inside Numba: seen once already
            return original(dispatcher, args, launch_config)
        call = KernelCall(dispatcher, dispatcher.py_func.__name__, tuple(args),
                          *launch_dims(launch_config.griddim, launch_config.blockdim), launch_config.stream,
                          launch_config, _frame=sys._getframe(1))
        return _dispatch(call, lambda c: _numba_launches(original, dispatcher, tuple(c.args), c.config))

    CUDADispatcher.call = launched
    _restore.append(lambda: setattr(CUDADispatcher, "call", original))


def _patch_mlir() -> None:
    """numba-cuda-mlir launches through the object ``kernel[grid, block]`` returns, not the dispatcher."""
    from numba_cuda_mlir.descriptor import _ArgMarshaller

    original = _ArgMarshaller.__call__

    def launched(configured: Any, *args: Any) -> Any:
        if getattr(_in_numba, "depth", 0):
            return original(configured, *args)
        dims = configured._available_launch_config
        call = KernelCall(configured._dispatcher, configured._dispatcher.py_func.__name__, args,
                          *launch_dims(dims["grid"], dims["block"]), configured._launch_stream, configured,
                          _frame=sys._getframe(1))

        def proceed(c: KernelCall) -> Any:
            if c.config is not configured:
                raise NotImplementedError("on numba-cuda-mlir a launch's configuration cannot be replaced "
                                          "while it is watched (a CUDA graph's capture): use numba-cuda")
            return _numba_launches(lambda _, a, __: original(configured, *a), None, tuple(c.args), None)

        return _dispatch(call, proceed)

    _ArgMarshaller.__call__ = launched
    _restore.append(lambda: setattr(_ArgMarshaller, "__call__", original))


def _patch() -> None:
    if is_simulator():
        _patch_simulator()
    elif COMPILER[0]:
        _patch_mlir()
    else:
        _patch_gpu()


@contextmanager
def on_launch(subscriber: Subscriber) -> Iterator[None]:
    """Call ``subscriber(call, proceed)`` for every kernel launch inside the block (see the module)."""
    if not _subscribers:
        _patch()
    _subscribers.append(subscriber)
    try:
        yield
    finally:
        del _subscribers[max(k for k, s in enumerate(_subscribers) if s is subscriber)]
        if not _subscribers:
            while _restore:
                _restore.pop()()


def watching() -> bool:
    """True while anyone subscribes (Numba's launch path is patched)."""
    return bool(_subscribers)
