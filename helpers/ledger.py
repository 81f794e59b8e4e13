"""The trip ledger: which arrays each kernel launch reads and writes, and how many bytes.

Write the launches in plain Numba syntax inside a ``with Ledger() as ledger:`` block::

    with Ledger("three kernels") as three:
        add_kernel[blocks, BLOCK_SIZE](a, b, t1)
        ...
    three.show()

Nothing is typed in: the counts come from the kernels themselves.

Both backends count the same thing, the *distinct* elements each thread reads from
and writes to each array (:mod:`helpers.counting` defines it and tests that the two
agree):

* In the **simulator** the elements each thread loads and stores are recorded as the
  kernel runs (a recording subclass of the simulator's ``FakeCUDAArray`` is passed
  in place of each device array).
* On a **GPU** the launch's own compiled PTX is followed on the host for every thread
  of the launch (:mod:`helpers.counting.emulate`), recording the elements each thread
  loads and stores; where the PTX does not say (an index loaded from memory), the
  launch is marked uncounted with the reason.

``with counting_engine("static"):`` (or ``"dynamic"``) forces one engine on either
backend, so a test or the grader can check that both give the same answer.

A *trip*, as the chapter counts it, is one direction of traffic between a launch
and device memory: a launch that reads arrays makes one read trip, a launch that
writes makes one write trip.

**Host arrays.**  By default a host NumPy array passed to a kernel is an error:
Numba would copy it to the GPU before the launch and back after it, hiding two
trips over the much slower host link.  ``Ledger(name, allow_host_arrays=True)``
lets such launches run and records those copies as *host trips*, separately from
the device-memory trips: every host array (or ``cuda.InOut`` hint) is copied in
and out, a ``cuda.In`` hint only in, a ``cuda.Out`` hint only out.
"""

from __future__ import annotations

import copy
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from math import prod
from typing import Any, Iterator, Sequence

import numpy as np

from .backend import is_simulator
from .counting import (
    CannotAttribute,
    LaunchArgs,
    Traffic,
    copies_for_a_count,
    is_array,
    launch_dims,
    naming_arguments,
    recording_arguments,
    simulated_traffic,
    static_traffic,
    traffic_from_touches,
)
from .validate import is_c_contiguous

ENGINES = ("auto", "static", "dynamic")
_engine: list[str] = ["auto"]


@contextmanager
def counting_engine(name: str) -> Iterator[None]:
    """Count the launches in the block with one engine: ``"static"`` (the compiled PTX, followed
    for every thread), ``"dynamic"`` (run in the simulator, recording each access) or ``"auto"``.

    ``"auto"`` (the default) counts in the simulator when the lesson runs there and
    from the PTX on a GPU.  Both engines count the same thing; forcing one lets a test
    or the grader check that they agree, on either backend.
    """
    if name not in ENGINES:
        raise ValueError(f"the counting engine is one of {', '.join(ENGINES)}; got {name!r}")
    _engine.append(name)
    try:
        yield
    finally:
        _engine.pop()


def current_engine() -> str:
    """The engine counting now: "static" or "dynamic" ("auto" resolved for this backend)."""
    name = _engine[-1]
    if name == "auto":
        return "dynamic" if is_simulator() else "static"
    return name


class HostArrayRefused(TypeError):
    """A launch was given a host array (or a ``cuda.In``/``Out``/``InOut`` hint) that the ledger may not count.

    ``argument`` and ``kernel`` name the argument and the kernel, so that a caller (the
    grader) can say it in its own words.
    """

    def __init__(self, message: str, argument: str, kernel: str) -> None:
        super().__init__(message)
        self.argument, self.kernel = argument, kernel


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
class Launch:
    """One kernel launch as the ledger saw it."""

    kernel: str
    threads: int
    arrays: list[ArrayTraffic]
    counted_by: str  # "simulator" (executed accesses) or "ptx" (compiled code)
    host_copies: list[HostCopy] = field(default_factory=list)
    uncounted: str | None = None  # why the compiled code could not be counted, if it could not
    refusal: CannotAttribute | None = field(default=None, repr=False)  # the engine's refusal itself (its kind)

    def counted_arrays(self) -> list[ArrayTraffic]:
        """The per-array traffic; raises :class:`CannotAttribute` for a launch that could not be counted."""
        if self.refusal is not None:
            raise self.refusal
        if self.uncounted is not None:
            raise CannotAttribute(self.uncounted)
        return self.arrays

    @property
    def elements(self) -> int:
        return max((a.size for a in self.counted_arrays()), default=0)

    @property
    def reads(self) -> list[str]:
        return [a.name for a in self.counted_arrays() if a.bytes_read]

    @property
    def writes(self) -> list[str]:
        return [a.name for a in self.counted_arrays() if a.bytes_written]

    @property
    def bytes_read(self) -> int:
        return sum(a.bytes_read for a in self.counted_arrays())

    @property
    def bytes_written(self) -> int:
        return sum(a.bytes_written for a in self.counted_arrays())

    @property
    def trips(self) -> int:
        return int(self.bytes_read > 0) + int(self.bytes_written > 0)

    @property
    def bytes_to_device(self) -> int:
        """Bytes copied host -> device before this launch (implicit copies of host arrays)."""
        return sum(c.to_device for c in self.host_copies)

    @property
    def bytes_to_host(self) -> int:
        """Bytes copied device -> host after this launch."""
        return sum(c.to_host for c in self.host_copies)

    @property
    def host_trips(self) -> int:
        """Copies in before the launch make one host trip, copies out after it another."""
        return int(self.bytes_to_device > 0) + int(self.bytes_to_host > 0)


def _number(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


@dataclass
class Ledger:
    """Records every kernel launch made inside its ``with`` block."""

    name: str = "pipeline"
    launches: list[Launch] = field(default_factory=list)
    allow_host_arrays: bool = False

    def __enter__(self) -> "Ledger":
        if any(ledger is self for ledger in _active):
            raise RuntimeError(
                f"the ledger '{self.name}' is already recording: entering it again would record every launch "
                "twice. Use one `with` block per ledger, or a second Ledger for a count inside this one."
            )
        _push(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _pop(self)

    def require_counted(self) -> None:
        """Raise :class:`CannotAttribute`, naming the kernel and the reason, if any launch was not counted."""
        for launch in self.launches:
            if launch.refusal is not None:  # the same kind (OutOfBounds, say), the message led by the kernel
                named = copy.copy(launch.refusal)
                named.args = (f"{launch.kernel}: {launch.uncounted}",)
                raise named
            if launch.uncounted is not None:
                raise CannotAttribute(f"{launch.kernel}: {launch.uncounted}")

    # --- totals ---------------------------------------------------------------
    @property
    def elements(self) -> int:
        """The problem size n: the largest array any launch touched."""
        return max((launch.elements for launch in self.launches), default=0)

    @property
    def trips(self) -> int:
        return sum(launch.trips for launch in self.launches)

    @property
    def bytes_read(self) -> int:
        return sum(launch.bytes_read for launch in self.launches)

    @property
    def bytes_written(self) -> int:
        return sum(launch.bytes_written for launch in self.launches)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    def bytes_per_element(self) -> float:
        """Bytes moved per element of the problem (32 for the three float32 kernels)."""
        if not self.launches:
            raise ValueError(f"the ledger '{self.name}' recorded no launches")
        return self.bytes_moved / self.elements

    # --- host <-> device copies (only with allow_host_arrays=True) ---------------
    @property
    def host_trips(self) -> int:
        """Host <-> device trips made by implicit copies (0 when every array was on the device)."""
        return sum(launch.host_trips for launch in self.launches)

    @property
    def bytes_to_device(self) -> int:
        return sum(launch.bytes_to_device for launch in self.launches)

    @property
    def bytes_to_host(self) -> int:
        return sum(launch.bytes_to_host for launch in self.launches)

    def host_bytes_per_element(self) -> float:
        """Bytes copied over the host link (both directions) per element of the problem."""
        if not self.launches:
            raise ValueError(f"the ledger '{self.name}' recorded no launches")
        return (self.bytes_to_device + self.bytes_to_host) / self.elements

    # --- reports ---------------------------------------------------------------
    def summary(self) -> str:
        n = self.elements
        line = (
            f"{self.name}: {len(self.launches)} launch{'es' if len(self.launches) != 1 else ''}, "
            f"{self.trips} trips, {_number(self.bytes_per_element())} bytes per element "
            f"({_number(self.bytes_read / n)} read + {_number(self.bytes_written / n)} written)"
        )
        if self.host_trips:
            line += (
                f"\n  + {self.host_trips} host trips: {_number(self.host_bytes_per_element())} bytes per "
                f"element over the host link ({_number(self.bytes_to_device / n)} host->device + "
                f"{_number(self.bytes_to_host / n)} device->host)"
            )
        return line

    def table(self) -> str:
        """One row per launch, in bytes per element so that it reads the same at any n."""
        n = self.elements
        host = self.host_trips > 0
        rows = [("launch", "kernel", "reads", "writes", "B read/elem", "B written/elem", "trips")]
        if host:
            rows[0] += ("host->device B/elem", "device->host B/elem", "host trips")
        for i, launch in enumerate(self.launches, 1):
            row: tuple[str, ...] = (
                str(i),
                launch.kernel,
                ", ".join(launch.reads) or "-",
                ", ".join(launch.writes) or "-",
                _number(launch.bytes_read / n),
                _number(launch.bytes_written / n),
                str(launch.trips),
            )
            if host:
                row += (
                    _number(launch.bytes_to_device / n),
                    _number(launch.bytes_to_host / n),
                    str(launch.host_trips),
                )
            rows.append(row)
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)

    def show(self) -> None:
        """Print the per-launch table and the totals."""
        print(self.table())
        print(self.summary())

    def counted_by(self) -> str:
        """How the counts were taken: executed accesses (simulator) or compiled PTX (GPU)."""
        methods = sorted({launch.counted_by for launch in self.launches})
        return " and ".join(methods)

    def round_trips(self) -> list[str]:
        """Arrays written by one launch and read back by a later one: intermediates."""
        written: set[str] = set()
        found: list[str] = []
        for launch in self.launches:
            for name in launch.reads:
                if name in written and name not in found:
                    found.append(name)
            written.update(launch.writes)
        return found


def compare(first: Ledger, second: Ledger) -> str:
    """Two pipelines side by side: trips, bytes per element, and the bytes ratio."""
    lines = [
        first.summary(),
        second.summary(),
        f"{first.name} moves {_number(first.bytes_per_element() / second.bytes_per_element())}x "
        f"the bytes of {second.name}",
    ]
    return "\n".join(lines)


# --- recording launches ---------------------------------------------------------

_active: list[Ledger] = []
_restore: list[Any] = []


def _push(ledger: Ledger) -> None:
    if not _active:
        _install()
    _active.append(ledger)


def _pop(ledger: Ledger) -> None:
    # by identity: two ledgers that recorded the same launches compare equal
    del _active[next(k for k, active in enumerate(_active) if active is ledger)]
    if not _active:
        while _restore:
            _restore.pop()()


_WRAPPERS = (__name__, "helpers.fuser", "helpers.classroom.watch")
"""Modules whose frames stand between a launch and the code that wrote it (the fuser's checked
launch, the grader's launch watch): the names are looked up past them."""


def _caller_names(args: Sequence[Any]) -> list[str]:
    """Name each argument as the learner's code names it (by identity in the calling frame)."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith("numba") or module in _WRAPPERS):
            break
        frame = frame.f_back
    names = []
    for i, arg in enumerate(args):
        name = f"arg{i}"
        if frame is not None and not isinstance(arg, (bool, int, float, np.number)):  # numbers: identity is ambiguous
            for scope in (frame.f_locals, frame.f_globals):
                match = next((k for k, v in scope.items() if v is arg and not k.startswith("_")), None)
                if match:
                    name = match
                    break
        names.append(name)
    return names


def _host_copy(arg: Any) -> tuple[np.ndarray, bool, bool] | None:
    """For an argument Numba copies implicitly: (host array, copied in?, copied out?); else None."""
    from numba import cuda

    if isinstance(arg, np.ndarray):
        return arg, True, True
    for hint, copied_in, copied_out in ((cuda.In, True, False), (cuda.InOut, True, True), (cuda.Out, False, True)):
        if isinstance(arg, hint):
            return np.asarray(arg.value), copied_in, copied_out
    return None


def _without_hints(args: Sequence[Any]) -> list[Any]:
    """The arguments with ``cuda.In``/``Out``/``InOut`` hints replaced by the arrays they wrap."""
    return [plan[0] if (plan := _host_copy(a)) is not None else a for a in args]


def _host_arrays_allowed() -> bool:
    return bool(_active) and all(ledger.allow_host_arrays for ledger in _active)


def _host_copies(args: Sequence[Any], names: Sequence[str]) -> list[HostCopy]:
    """The implicit copies Numba makes around a launch with these arguments."""
    copies = []
    for name, arg in zip(names, args):
        plan = _host_copy(arg)
        if plan is not None:
            host, copied_in, copied_out = plan
            copies.append(HostCopy(name, host.nbytes * copied_in, host.nbytes * copied_out))
    return copies


def _check_launch(kernel: str, args: Sequence[Any], names: Sequence[str]) -> LaunchArgs:
    """Refuse what the ledger cannot count, naming the argument; else the launch's argument record."""
    for name, arg in zip(names, args):
        if arg is None:
            raise TypeError(
                f"`{name}` (argument of {kernel}) is None: pass an array or a number. "
                "(Did a variable you meant to set keep its default, or a function return nothing?)"
            )
        if isinstance(arg, np.ndarray) and not _host_arrays_allowed():
            raise HostArrayRefused(
                f"`{name}` (argument of {kernel}) is a host NumPy array. Numba would copy it to the "
                f"GPU and back on every launch, hiding two extra trips; copy it once with "
                f"`{name} = cuda.to_device({name})`, or count those copies with "
                "`Ledger(name, allow_host_arrays=True)`.", name, kernel
            )
        plan = _host_copy(arg)
        if plan is not None and not _host_arrays_allowed():
            raise HostArrayRefused(
                f"`{name}` (argument of {kernel}) is a host array in a cuda.{type(arg).__name__} hint: "
                "Numba copies it between host and device around the launch. Count those copies "
                "with `Ledger(name, allow_host_arrays=True)`, or copy it once with cuda.to_device.", name, kernel
            )
        if plan is not None:
            arg = plan[0]
        if is_array(arg):
            if not is_c_contiguous(arg):
                raise ValueError(
                    f"`{name}` (argument of {kernel}) is not contiguous; the ledger counts "
                    "contiguous arrays only. Pass a contiguous copy."
                )
            if int(np.prod(arg.shape)) == 0:
                raise ValueError(f"`{name}` (argument of {kernel}) is empty (n = 0): nothing to count.")
    try:
        return LaunchArgs.of(_without_hints(args), names)
    except TypeError as exc:
        raise TypeError(f"{exc} (argument of {kernel})") from None


def _record(launch: Launch) -> None:
    for ledger in _active:
        ledger.launches.append(launch)


def _install() -> None:
    if is_simulator():
        _install_simulator_hook()
    else:
        _install_gpu_hook()


def _install_simulator_hook() -> None:
    from numba import cuda
    from numba.cuda.simulator import kernel as sim_kernel

    original = sim_kernel.FakeCUDAKernel.__call__

    def counting_call(self: Any, *args: Any) -> Any:
        if self._device or sim_kernel._get_kernel_context() is not None:
            return original(self, *args)
        name = self.fn.__name__
        names = _caller_names(_without_hints(args))
        record = _check_launch(name, args, names)
        host_copies = _host_copies(args, names)
        # Do the implicit copies here, as Numba would, so that the kernel's accesses
        # to the device copies are counted like any other device array's.
        plans = {i: plan for i, a in enumerate(args) if (plan := _host_copy(a)) is not None}
        args = [cuda.to_device(plans[i][0]) if i in plans else a for i, a in enumerate(args)]
        grid, block = launch_dims(self.grid_dim, self.block_dim)
        if current_engine() == "dynamic":
            wrapped, touches = recording_arguments(args, record.names)
            result = original(self, *wrapped)
            traffic: Traffic | CannotAttribute | str = traffic_from_touches(name, record, touches)
        else:
            result = original(self, *naming_arguments(args, record.names))  # an IndexError names the array
            traffic = _static_count(self, grid, block, record)
        for i, (host, _, copied_out) in plans.items():
            if copied_out:
                args[i].copy_to_host(host)
        _record(_launch(name, grid, block, record, traffic, host_copies))
        return result

    sim_kernel.FakeCUDAKernel.__call__ = counting_call
    _restore.append(lambda: setattr(sim_kernel.FakeCUDAKernel, "__call__", original))


def _install_gpu_hook() -> None:
    from numba import cuda
    from numba.cuda.dispatcher import CUDADispatcher

    original = CUDADispatcher.call

    def counting_call(self: Any, args: Sequence[Any], launch_config: Any) -> Any:
        name = self.py_func.__name__
        plain = _without_hints(args)
        names = _caller_names(plain)
        record = _check_launch(name, args, names)
        grid, block = launch_dims(launch_config.griddim, launch_config.blockdim)
        if current_engine() == "dynamic":  # on copies of the inputs as they are before this launch
            try:
                with copies_for_a_count():  # not the caller's copies: a watcher of those leaves them out
                    on_device = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in plain]
                    traffic: Traffic | CannotAttribute | str = simulated_traffic(self, grid, block, on_device, names)
            except CannotAttribute as refusal:  # a global the simulator count cannot carry, named
                traffic = refusal
            except (RuntimeError, ValueError) as failure:  # recorded like a refusal: the launch still runs
                traffic = str(failure)
        result = original(self, args, launch_config)
        if current_engine() != "dynamic":
            ptx = None
            try:
                ptx = self.inspect_asm(tuple(self.typeof_pyval(a) for a in plain))
            except (KeyError, TypeError):
                pass  # static_traffic compiles the kernel itself
            traffic = _static_count(self, grid, block, record, ptx)
        _record(_launch(name, grid, block, record, traffic, _host_copies(args, names)))
        return result

    CUDADispatcher.call = counting_call
    _restore.append(lambda: setattr(CUDADispatcher, "call", original))


def _static_count(kernel: Any, grid: tuple[int, ...], block: tuple[int, ...], record: LaunchArgs,
                  ptx: str | None = None) -> Traffic | CannotAttribute:
    """The launch counted from its compiled PTX, or the reason it cannot be (recorded, not raised:
    the learner's code runs on, and asking this launch for a count raises with the reason)."""
    try:
        return static_traffic(kernel, grid, block, record, ptx=ptx)
    except CannotAttribute as reason:
        return reason
    except Exception as bug:  # the counter's own failure must not stop the learner's launch
        name = getattr(getattr(kernel, "py_func", None), "__name__", "the kernel")
        return CannotAttribute(f"the static counter failed while following {name}'s compiled code "
                               f"({type(bug).__name__}: {bug}); this is a gap in the counter, not in your kernel")


def _launch(name: str, grid: tuple[int, ...], block: tuple[int, ...], record: LaunchArgs,
            traffic: Traffic | CannotAttribute | str, host_copies: list[HostCopy]) -> Launch:
    """One :class:`Launch` from a count (or the reason there is none), on either engine and backend."""
    threads = prod(grid) * prod(block)
    if isinstance(traffic, (CannotAttribute, str)):
        method = "ptx" if current_engine() == "static" else "simulator"
        refusal = traffic if isinstance(traffic, CannotAttribute) else None
        return Launch(name, threads, [], method, host_copies, uncounted=str(traffic), refusal=refusal)
    return Launch(name, threads, _array_traffic(traffic, record), traffic.method, host_copies)


def _array_traffic(traffic: Traffic, record: LaunchArgs) -> list[ArrayTraffic]:
    """One :class:`ArrayTraffic` per array argument name, in argument order."""
    arrays: dict[str, ArrayTraffic] = {}
    per_array = traffic.per_array()
    for _, info in record.arrays():
        if info.name not in arrays:
            read, written = per_array.get(info.name, (0, 0))
            arrays[info.name] = ArrayTraffic(info.name, info.itemsize, info.size, read, written)
    return list(arrays.values())
