"""The trip ledger: which arrays each kernel launch reads and writes, and how many bytes.

Write the launches in plain Numba syntax inside a ``with Ledger() as ledger:`` block::

    with Ledger("three kernels") as three:
        add_kernel[blocks, BLOCK_SIZE](a, b, t1)
        ...
    three.show()

Nothing is typed in: the counts come from the kernels themselves.  The ledgers see the
launches through :mod:`helpers.launch_hook`, which names each argument as the calling code
names it (``a``, ``t1``) and describes it once for every engine.

Both backends count the same thing, the *distinct* elements each thread reads from
and writes to each array (:mod:`helpers.counting` defines it and tests that the two
agree):

* In the **simulator** the elements each thread loads and stores are recorded as the
  kernel runs (a recording subclass of the simulator's ``FakeCUDAArray`` is passed
  in place of each device array).
* On a **GPU** the launch's own compiled PTX is followed on the host for every thread
  of the launch (:func:`helpers.counting.ptx.machine.emulate`), recording the elements each thread
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

**A ledger travels.**  ``ledger.to_json()`` and ``Ledger.from_json(data)`` carry one across
a process boundary, and ``Ledger.counted_in_simulator(function, **kwargs)`` has the
simulator count every launch of the ledgers a function fills, on a GPU too (in a
subprocess).  ``ledger.totals()`` gives the totals a results record keeps.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from .backend import is_simulator
from .counting import (ArgInfo, ArrayTraffic, CannotAttribute, HostCopy, LaunchArgs, Traffic, copies_for_a_count,
                       naming_arguments, recording_arguments, simulated_traffic, static_traffic, traffic_from_touches)
from .counting.other_backend import SIMULATOR, OtherBackendError, run_under
from .counting.record import short_number, summed
from .launch_hook import KernelCall, Proceed, on_launch

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
class Launch:
    """One kernel launch as the ledger saw it."""

    kernel: str
    threads: int
    arrays: list[ArrayTraffic]
    counted_by: str  # "simulator" (executed accesses) or "ptx" (compiled code)
    host_copies: list[HostCopy] = field(default_factory=list)
    uncounted: str | None = None  # why the compiled code could not be counted, if it could not
    refusal: CannotAttribute | None = field(default=None, repr=False, compare=False)  # the engine's refusal (its kind)

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

    bytes_read, bytes_written = summed("counted_arrays", "bytes_read"), summed("counted_arrays", "bytes_written")
    bytes_to_device = summed("host_copies", "to_device", "Bytes copied host -> device before this launch.")
    bytes_to_host = summed("host_copies", "to_host", "Bytes copied device -> host after this launch.")

    @property
    def trips(self) -> int:
        return int(self.bytes_read > 0) + int(self.bytes_written > 0)

    @property
    def host_trips(self) -> int:
        """Copies in before the launch make one host trip, copies out after it another."""
        return int(self.bytes_to_device > 0) + int(self.bytes_to_host > 0)

    def to_json(self) -> dict[str, Any]:
        """The launch as JSON data; a refusal travels as its kind and its words."""
        data = dataclasses.asdict(dataclasses.replace(self, refusal=None))
        data["refusal"] = None if self.refusal is None else type(self.refusal).__name__
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Launch":
        kind = data["refusal"]
        refusal = None if kind is None else _refusal_kinds().get(kind, CannotAttribute)(data["uncounted"])
        return cls(data["kernel"], data["threads"], [ArrayTraffic(**a) for a in data["arrays"]], data["counted_by"],
                   [HostCopy(**c) for c in data["host_copies"]], data["uncounted"], refusal)


def _refusal_kinds() -> dict[str, type[CannotAttribute]]:
    """Every kind of :class:`CannotAttribute` by name (those the counters define where they raise them too)."""
    kinds, todo = {}, [CannotAttribute]
    while todo:
        kind = todo.pop()
        kinds[kind.__name__] = kind
        todo += kind.__subclasses__()
    return kinds


@dataclass
class Totals:
    """A ledger's totals as plain values: what a results record keeps of a pipeline's count."""

    launches: int
    trips: int
    bytes_per_element: float
    working_set_per_element: float  # bytes of the distinct arrays the launches touched, per element
    round_trips: list[str]
    counted_by: str


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

    trips, bytes_read, bytes_written = (summed("launches", a) for a in ("trips", "bytes_read", "bytes_written"))

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    def bytes_per_element(self) -> float:
        """Bytes moved per element of the problem (32 for the three float32 kernels)."""
        if not self.launches:
            raise ValueError(f"the ledger '{self.name}' recorded no launches")
        return self.bytes_moved / self.elements

    # --- host <-> device copies (only with allow_host_arrays=True) ---------------
    host_trips = summed("launches", "host_trips", "Host <-> device trips made by implicit copies (0 when none).")
    bytes_to_device, bytes_to_host = summed("launches", "bytes_to_device"), summed("launches", "bytes_to_host")

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
            f"{self.trips} trips, {short_number(self.bytes_per_element())} bytes per element "
            f"({short_number(self.bytes_read / n)} read + {short_number(self.bytes_written / n)} written)"
        )
        if self.host_trips:
            line += (
                f"\n  + {self.host_trips} host trips: {short_number(self.host_bytes_per_element())} bytes per "
                f"element over the host link ({short_number(self.bytes_to_device / n)} host->device + "
                f"{short_number(self.bytes_to_host / n)} device->host)"
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
            row: tuple[str, ...] = (str(i), launch.kernel, ", ".join(launch.reads) or "-",
                                    ", ".join(launch.writes) or "-", short_number(launch.bytes_read / n),
                                    short_number(launch.bytes_written / n), str(launch.trips))
            if host:
                row += (short_number(launch.bytes_to_device / n), short_number(launch.bytes_to_host / n),
                        str(launch.host_trips))
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

    def bytes_by_array(self) -> dict[str, int]:
        """Bytes read and written per array, over all launches, in the order the arrays first appear."""
        by_array: dict[str, int] = {}
        for launch in self.launches:
            for a in launch.counted_arrays():
                by_array[a.name] = by_array.get(a.name, 0) + a.bytes_read + a.bytes_written
        return by_array

    def working_set_per_element(self) -> float:
        """Bytes of the distinct arrays the launches touched (each counted once), per element."""
        sizes = {a.name: a.itemsize * a.size for launch in self.launches for a in launch.counted_arrays()}
        return sum(sizes.values()) / self.elements

    def totals(self) -> Totals:
        """The totals a results record keeps: launches, trips, bytes and working set per element, round trips."""
        return Totals(len(self.launches), self.trips, self.bytes_per_element(), self.working_set_per_element(),
                      self.round_trips(), self.counted_by())

    # --- travelling: a ledger as JSON, and counted in the simulator on either backend ----
    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "allow_host_arrays": self.allow_host_arrays,
                "launches": [launch.to_json() for launch in self.launches]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Ledger":
        return cls(data["name"], [Launch.from_json(launch) for launch in data["launches"]], data["allow_host_arrays"])

    @staticmethod
    def counted_in_simulator(function: Callable[..., Sequence["Ledger"]], **kwargs: Any) -> list["Ledger"]:
        """The ledgers ``function(**kwargs)`` fills, every launch counted in the simulator, on either backend.

        For kernels the compiled-code counter cannot follow (a loop along a row inside a block,
        say): the simulator counts every element each thread touches.  In the simulator the
        function runs here; on a GPU it runs in a simulator subprocess (so it must be a function of
        a helpers module, its arguments JSON values) and its ledgers come back as JSON.
        """
        if not is_simulator():
            return _counted_in_subprocess(function, kwargs)
        with counting_engine("dynamic"):
            return list(function(**kwargs))

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
        f"bytes per element, {first.name} over {second.name}: "
        f"{short_number(first.bytes_per_element() / second.bytes_per_element())}x",
    ]
    return "\n".join(lines)


# --- recording launches ---------------------------------------------------------

_active: list[Ledger] = []
_subscription = ExitStack()  # the ledgers' one subscription to the launch hook, while any records


def _push(ledger: Ledger) -> None:
    if not _active:
        _subscription.enter_context(on_launch(_count))
    _active.append(ledger)


def _pop(ledger: Ledger) -> None:
    # by identity: two ledgers that recorded the same launches compare equal
    del _active[next(k for k, active in enumerate(_active) if active is ledger)]
    if not _active:
        _subscription.close()


def _host_arrays_allowed() -> bool:
    return bool(_active) and all(ledger.allow_host_arrays for ledger in _active)


def _refuse_host_copy(kernel: str, info: ArgInfo) -> None:
    """Raise :class:`HostArrayRefused`, naming the argument, unless every ledger counts the copies Numba makes of it."""
    if info.host is None or _host_arrays_allowed():
        return
    if info.host == "array":
        raise HostArrayRefused(
            f"`{info.name}` (argument of {kernel}) is a host NumPy array. Numba would copy it to the "
            f"GPU and back on every launch, hiding two extra trips; copy it once with "
            f"`{info.name} = cuda.to_device({info.name})`, or count those copies with "
            "`Ledger(name, allow_host_arrays=True)`.", info.name, kernel
        )
    raise HostArrayRefused(
        f"`{info.name}` (argument of {kernel}) is a host array in a cuda.{info.host} hint: "
        "Numba copies it between host and device around the launch. Count those copies "
        "with `Ledger(name, allow_host_arrays=True)`, or copy it once with cuda.to_device.", info.name, kernel
    )


def _check_launch(call: KernelCall) -> LaunchArgs:
    """Refuse what the ledger cannot count, naming the argument; else the launch's argument record."""
    for name, arg in zip(call.names, call.plain):
        if arg is None:
            raise TypeError(
                f"`{name}` (argument of {call.name}) is None: pass an array or a number. "
                "(Did a variable you meant to set keep its default, or a function return nothing?)"
            )
    try:
        record = call.record
    except TypeError as exc:
        raise TypeError(f"{exc} (argument of {call.name})") from None
    for info in record.args:
        _refuse_host_copy(call.name, info)
        if info.is_array and not info.contiguous:
            raise ValueError(f"`{info.name}` (argument of {call.name}) is not contiguous; the ledger counts "
                             "contiguous arrays only. Pass a contiguous copy.")
        if info.is_array and info.size == 0:
            raise ValueError(f"`{info.name}` (argument of {call.name}) is empty (n = 0): nothing to count.")
    return record


Counted = Traffic | CannotAttribute | str  # a count, or the reason there is none (a refusal, or a failure's words)


def _count(call: KernelCall, proceed: Proceed) -> Any:
    """The ledgers' subscriber: check the launch, run it counted, and record it in every active ledger."""
    record = _check_launch(call)
    result, traffic = (_count_simulated if is_simulator() else _count_on_gpu)(call, record, proceed)
    launch = _launch(call, traffic, record.host_copies())
    for ledger in _active:
        ledger.launches.append(launch)
    return result


def _count_simulated(call: KernelCall, record: LaunchArgs, proceed: Proceed) -> tuple[Any, Counted]:
    """In the simulator: the launch run on arrays that record (or name) what each thread touches."""
    from numba import cuda  # numba loads after helpers chose the backend

    # Do the implicit copies here, as Numba would, so that the kernel's accesses
    # to the device copies are counted like any other device array's.
    args = [cuda.to_device(value) if info.host else value for value, info in zip(call.plain, record.args)]
    if current_engine() == "dynamic":
        call.args, touches = recording_arguments(args, record.names)
        result = proceed()
        traffic: Counted = traffic_from_touches(call.name, record, touches)
    else:
        call.args = naming_arguments(args, record.names)  # an IndexError names the array
        result = proceed()
        traffic = _static_count(call, record)
    for host, info, device in zip(call.plain, record.args, args):
        if info.copied_out:
            device.copy_to_host(host)
    return result, traffic


def _count_on_gpu(call: KernelCall, record: LaunchArgs, proceed: Proceed) -> tuple[Any, Counted]:
    """On a GPU: the dynamic count (in a simulator subprocess) before the launch, or the static one after it."""
    if current_engine() == "dynamic":  # on copies of the inputs as they are before this launch
        traffic = _simulated_elsewhere(call, record)
        return proceed(), traffic
    result = proceed()
    ptx = None
    try:
        ptx = call.kernel.inspect_asm(tuple(call.kernel.typeof_pyval(a) for a in call.plain))
    except (KeyError, TypeError):
        pass  # static_traffic compiles the kernel itself
    return result, _static_count(call, record, ptx)


def _simulated_elsewhere(call: KernelCall, record: LaunchArgs) -> Counted:
    """The launch counted in a simulator subprocess, on copies of its arrays (or the reason it cannot be)."""
    from numba import cuda  # numba loads after helpers chose the backend

    try:
        with copies_for_a_count():  # not the caller's copies: a watcher of those leaves them out
            on_device = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in call.plain]
            return simulated_traffic(call.kernel, call.grid, call.block, on_device, record)
    except CannotAttribute as refusal:  # a global the simulator count cannot carry, named
        return refusal
    except (RuntimeError, ValueError) as failure:  # recorded like a refusal: the launch still runs
        return str(failure)


def _static_count(call: KernelCall, record: LaunchArgs, ptx: str | None = None) -> Traffic | CannotAttribute:
    """The launch counted from its compiled PTX, or the reason it cannot be (recorded, not raised:
    the learner's code runs on, and asking this launch for a count raises with the reason)."""
    try:
        return static_traffic(call.kernel, call.grid, call.block, record, ptx=ptx)
    except CannotAttribute as reason:
        return reason
    except Exception as bug:  # the counter's own failure must not stop the learner's launch
        return CannotAttribute(f"the static counter failed while following {call.name}'s compiled code "
                               f"({type(bug).__name__}: {bug}); this is a gap in the counter, not in your kernel")


def _launch(call: KernelCall, traffic: Counted, host_copies: list[HostCopy]) -> Launch:
    """One :class:`Launch` from a count (or the reason there is none), on either engine and backend."""
    threads = prod(call.grid) * prod(call.block)
    if isinstance(traffic, (CannotAttribute, str)):
        method = "ptx" if current_engine() == "static" else "simulator"
        refusal = traffic if isinstance(traffic, CannotAttribute) else None
        return Launch(call.name, threads, [], method, host_copies, uncounted=str(traffic), refusal=refusal)
    return Launch(call.name, threads, traffic.arrays, traffic.method, host_copies)


# --- counting a whole function in the simulator, on either backend ---------------------


def _counted_in_subprocess(function: Callable[..., Sequence[Ledger]], kwargs: dict[str, Any]) -> list[Ledger]:
    request = {"function": f"{function.__module__}:{function.__name__}", "kwargs": kwargs}
    try:
        rows = run_under(SIMULATOR, "helpers.ledger:counted_request", request)
    except OtherBackendError as exc:
        raise RuntimeError(f"counting {function.__name__} in the simulator failed: {exc}") from exc
    return [Ledger.from_json(row) for row in rows]


def counted_request(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The simulator's side of :meth:`Ledger.counted_in_simulator`: call the named helpers function, return its ledgers."""
    module, _, name = request["function"].partition(":")
    if not module.startswith("helpers."):
        raise ValueError(f"Ledger.counted_in_simulator counts functions of helpers modules, got {request['function']!r}")
    function = getattr(importlib.import_module(module), name)
    with counting_engine("dynamic"):
        return [ledger.to_json() for ledger in function(**request["kwargs"])]
