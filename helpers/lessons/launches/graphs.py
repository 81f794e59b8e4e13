"""CUDA graphs: record a sequence of Numba launches once, then replay it with one call.

Every Numba launch costs the host tens of microseconds; a replay hands the whole recorded
sequence to the driver in one call.  Write the launches as a function of a stream, so that
the same code runs directly or is captured::

    def pipeline(stream):
        add_kernel[blocks, BLOCK_SIZE, stream](a, b, t1)
        multiply_kernel[blocks, BLOCK_SIZE, stream](t1, c, t2)
        scale_kernel[blocks, BLOCK_SIZE, stream](t2, s, out)

    graph = capture(pipeline)   # checks every launch's arguments, then records
    graph.run()                 # replay and wait

A graph replays on the buffers and scalars it was captured with: copy new inputs into them on
the graph's stream (:meth:`CudaGraph.copy_into`), or capture again.  Graphs are built with
``cuda.core`` (Numba launches into a ``GraphBuilder`` passed where a stream goes).  The simulator
has no graphs: :func:`capture` checks the launches there, then raises :class:`GraphsNeedGPU`.
"""

from __future__ import annotations

import inspect
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from helpers.backend import is_simulator
from helpers.counting import is_array
from helpers.launch_hook import KernelCall, Proceed, on_launch
from helpers.ledger import Ledger
from helpers.harness.peers import Unavailable
from helpers.timing import MIN_HOLD_US, hold_kernel, us_per_hold_iteration

from .record import Timed

GRAPHS_NEED_GPU = ("CUDA graphs need a GPU: the simulator runs each kernel as Python code and cannot record "
                   "launches into a graph")
NO_LAUNCHES = "the pipeline made no Numba launches: there is nothing to record"

PIPELINE_SHAPE = ("a function of the stream to launch on, e.g. "
                  "`def pipeline(stream): kernel[blocks, threads, stream](...)`")


class GraphsNeedGPU(Unavailable):
    """Raised by :func:`capture` in the CUDA simulator (after the launches were checked)."""


class NotCapturable(TypeError):
    """A launch that a graph cannot record as it stands (the message says why and what to do)."""


def core() -> Any:
    """The ``cuda.core`` module (``cuda.core.experimental`` in releases before 0.4)."""
    try:
        import cuda.core as module

        if hasattr(module, "Device"):
            return module
    except ImportError:
        pass
    import cuda.core.experimental as module  # older cuda.core releases

    return module


def graph_builder_type() -> type:
    """``cuda.core``'s ``GraphBuilder`` class (in ``cuda.core.graph`` from cuda.core 1.x)."""
    try:
        from cuda.core.graph import GraphBuilder

        return GraphBuilder
    except ImportError:
        return core().GraphBuilder  # type: ignore[no-any-return]


@lru_cache(maxsize=1)
def default_stream() -> Any:
    """One ``cuda.core`` stream on the current device, shared by the graphs of a session (Numba's launches and
    copies accept it as their stream)."""
    if is_simulator():
        raise GraphsNeedGPU(GRAPHS_NEED_GPU)
    from numba import cuda

    cuda.current_context()  # Numba's context is the device's primary context; cuda.core shares it
    device = core().Device()
    device.set_current()
    return device.create_stream()


def timing_event_options() -> Any:
    """``EventOptions`` for events that record time (the field was renamed in cuda.core 0.4)."""
    options = core().EventOptions
    try:
        return options(timing_enabled=True)
    except TypeError:
        return options(timing_disabled=False)


def _close(thing: Any) -> None:
    """Release a cuda.core object now where this version can (older ones free it when collected)."""
    getattr(thing, "close", lambda: None)()


def legacy_stream() -> Any:
    """``cuda.core``'s handle on the legacy default stream: where Numba, CuPy and torch launch by default."""
    module = core()
    stream = getattr(module, "LEGACY_DEFAULT_STREAM", None)
    return stream if stream is not None else module.Stream.from_handle(0)


def _check_pipeline(pipeline: Any, caller: str) -> None:
    """Raise ``TypeError`` unless ``pipeline`` can be called with one argument, the stream."""
    if not callable(pipeline):
        raise TypeError(f"{caller} needs the pipeline, {PIPELINE_SHAPE}; got {type(pipeline).__name__}")
    try:
        signature = inspect.signature(pipeline)
    except (TypeError, ValueError):
        return  # no signature to read (a built-in): the call itself will say
    try:
        signature.bind(None)
    except TypeError:
        name = getattr(pipeline, "__name__", type(pipeline).__name__)
        raise TypeError(f"{caller} calls the pipeline with one argument, the stream, but {name}{signature} "
                        f"cannot take it: write the pipeline as {PIPELINE_SHAPE}") from None


def _refuse_host_copies(kernel: str, args: Sequence[Any], hosts: Sequence[str | None]) -> None:
    """Raise :class:`NotCapturable` for an argument Numba copies around the launch (a host array, or one in a
    ``cuda.In``/``Out``/``InOut`` hint, as :func:`helpers.launch_hook.host_copy` says): a graph cannot record it."""
    for position, (arg, host) in enumerate(zip(args, hosts), 1):
        where = f"argument {position} of {kernel}"
        if host == "array":
            raise NotCapturable(f"{where} is a host NumPy array. Numba copies a host array to the GPU before every "
                                "launch and back after it, and a graph cannot record those copies. Copy it once "
                                "before capturing, e.g. `a_gpu = cuda.to_device(a)`, and launch on `a_gpu`.")
        if host is not None:
            raise NotCapturable(f"{where} is a host array in a cuda.{host} hint, which asks for a copy around the "
                                "launch; a graph cannot record it. Copy the array to the device once before capturing.")
        if isinstance(arg, (list, tuple)) and any(isinstance(x, np.ndarray) for x in arg):
            raise NotCapturable(f"{where} holds host NumPy arrays; pass device arrays (cuda.to_device) instead.")


@dataclass
class CapturedLaunch:
    """One launch as it was recorded: the kernel, its launch shape and its arguments."""

    kernel: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    arrays: int  # how many array arguments it took
    scalars: list[Any] = field(default_factory=list)  # scalar arguments, baked into the graph


def _describe(call: KernelCall) -> CapturedLaunch:
    arrays = sum(1 for a in call.plain if is_array(a))
    scalars = [a for a in call.plain if isinstance(a, (int, float, complex, np.number))]
    return CapturedLaunch(call.name, call.grid, call.block, arrays, scalars)


class SimulatedStream(int):
    """What a pipeline gets as its ``stream`` in the simulator, which has no streams (it equals 0).

    A launch written ``kernel[blocks, threads, stream]`` passes it on, so the checks can tell it from
    a launch that leaves the stream out: a graph on a GPU would not record that one.
    """

    def __new__(cls) -> SimulatedStream:
        return super().__new__(cls, 0)

    def __repr__(self) -> str:
        return "<the simulator's stand-in stream>"


def _wrong_stream(name: str) -> NotCapturable:
    return NotCapturable(f"{name} was launched on another stream than the one the pipeline was given, so a "
                         f"graph would not record it: write {name}[grid, block, stream](...) with the pipeline's "
                         "`stream` argument.")


class _Watch:
    """Check (and note) every Numba launch made while it is active, on the pipeline's stream ``expected`` (a
    handle on a GPU, the :class:`SimulatedStream` in the simulator, ``None``: any).  ``adopt`` lets launches on
    the default stream through, moved onto it on a GPU.  A ledger can count the same launches.
    """

    def __init__(self, expected: Any, *, run: bool, adopt: Any = None) -> None:
        self.expected, self.adopt = expected, adopt
        self.run = run  # False in the simulator: check and note, but do not execute
        self.launches: list[CapturedLaunch] = []
        self._subscription = ExitStack()

    def __enter__(self) -> _Watch:
        self._subscription.enter_context(on_launch(self._seen))
        return self

    def __exit__(self, *exc: object) -> None:
        self._subscription.close()

    def _seen(self, call: KernelCall, proceed: Proceed) -> Any:
        _refuse_host_copies(call.name, call.given, [host for _, host in call.hosts])
        if is_simulator():
            self._check_simulated_stream(call.name, call.stream)
        else:
            self._check_stream(call)
        self.launches.append(_describe(call))
        return proceed() if self.run else None

    def _check_simulated_stream(self, name: str, given: Any) -> None:
        if self.expected is None or given is self.expected:
            return
        if self.adopt is not None and (given is None or (type(given) is int and given == 0)):
            return  # the default stream, which a capture that adopts it records too
        raise _wrong_stream(name)

    def _check_stream(self, call: KernelCall) -> None:
        handle = int(call.stream.handle)
        if self.adopt is not None and handle == 0:
            # A configuration of its own: Numba shares one per (grid, block, stream) among all
            # later launches, so changing this one's stream would move those onto the capture's.
            config = call.config
            call.config = call.kernel.configure(config.griddim, config.blockdim, stream=self.adopt,
                                                sharedmem=config.sharedmem)
            handle = int(self.adopt.handle)
        if self.expected is not None and handle != self.expected:
            raise _wrong_stream(call.name)


class CudaGraph:
    """A recorded sequence of launches, replayed on one ``cuda.core`` stream."""

    def __init__(self, graph: Any, stream: Any, launches: list[CapturedLaunch], name: str) -> None:
        self._graph, self.stream, self.launches, self.name = graph, stream, launches, name

    def replay(self, stream: Any = None) -> None:
        """Queue one replay of every recorded launch (returns at once, like a launch), on the graph's own
        stream or another ``cuda.core`` one (``legacy_stream()``, to queue it behind default-stream work)."""
        self._graph.launch(self.stream if stream is None else stream)

    def sync(self) -> None:
        """Wait until everything queued on the graph's stream has finished."""
        self.stream.sync()

    def run(self) -> None:
        """Replay once and wait for it."""
        self.replay()
        self.sync()

    def copy_into(self, device_array: Any, host_array: np.ndarray) -> None:
        """Copy new input data into a captured buffer on the graph's own stream, ordered before the next replay."""
        if tuple(device_array.shape) != tuple(np.shape(host_array)):
            raise ValueError(f"shape {np.shape(host_array)} does not match the captured buffer's {device_array.shape}; "
                             "a graph replays on the buffers it was captured with: capture again for another size")
        if np.dtype(device_array.dtype) != np.asarray(host_array).dtype:
            raise TypeError(f"dtype {np.asarray(host_array).dtype} does not match the captured buffer's {device_array.dtype}")
        device_array.copy_to_device(np.ascontiguousarray(host_array), stream=self.stream)

    def close(self) -> None:
        _close(self._graph)

    def __repr__(self) -> str:
        kernels = ", ".join(launch.kernel for launch in self.launches)
        return f"CudaGraph({self.name!r}: {len(self.launches)} launches: {kernels})"


def capture(pipeline: Callable[[Any], object], *, name: str = "graph", stream: Any = None,
            warm_up: bool = True, adopt_default_stream: bool = False) -> CudaGraph:
    """Record the launches ``pipeline(stream)`` makes into a graph, ready to replay.

    Every launch is checked first (host arrays and launches on another stream are refused); with
    ``warm_up`` the pipeline runs once directly, so Numba compiles outside the capture.  In the simulator
    the launches are checked, then :class:`GraphsNeedGPU` is raised.  ``adopt_default_stream`` moves
    launches made without a stream (a library function's, say) onto the capture's stream.
    """
    _check_pipeline(pipeline, "capture")
    if is_simulator():
        launches = _in_simulator(pipeline, run=False, adopt=adopt_default_stream)
        count, kernels = len(launches), ", ".join(launch.kernel for launch in launches)
        launched = f"{count} launches ({kernels}) were" if count > 1 else f"1 launch ({kernels}) was"
        raise GraphsNeedGPU(f"{GRAPHS_NEED_GPU}. The {launched} checked: all their arrays are on the device, "
                            "and all go on the pipeline's stream.")
    stream = stream if stream is not None else default_stream()
    if warm_up:
        _direct(pipeline, stream, adopt_default_stream)
    return _record(pipeline, stream, name, adopt=adopt_default_stream)


def _in_simulator(pipeline: Callable[[Any], object], *, run: bool, adopt: bool = False) -> list[CapturedLaunch]:
    """``pipeline`` given the simulator's stand-in stream, every launch checked (and, with ``run``, made)."""
    simulated = SimulatedStream()
    with _Watch(simulated, run=run, adopt=simulated if adopt else None) as watch:
        pipeline(simulated)
    if not watch.launches:
        raise ValueError(NO_LAUNCHES)
    return watch.launches


def _direct(pipeline: Callable[[Any], object], stream: Any, adopt: bool = False) -> None:
    """Run the pipeline directly on ``stream``, every launch checked; wait for it."""
    with _Watch(int(stream.handle), run=True, adopt=stream if adopt else None):
        pipeline(stream)
    stream.sync()


def _record(pipeline: Callable[[Any], object], stream: Any, name: str, adopt: bool = False) -> CudaGraph:
    """Capture ``pipeline(builder)`` on ``stream``, checking each launch as it is recorded."""
    builder = stream.create_graph_builder()
    builder.begin_building()
    try:
        with _Watch(int(builder.stream.handle), run=True, adopt=builder.stream if adopt else None) as watch:
            pipeline(builder)
    except BaseException:
        try:  # leave the stream usable: end the capture and drop what was recorded
            builder.end_building()
        finally:
            _close(builder)
        raise
    builder.end_building()
    if not watch.launches:
        _close(builder)
        raise ValueError(NO_LAUNCHES)
    graph = builder.complete()
    _close(builder)
    return CudaGraph(graph, stream, watch.launches, name)


def counted(pipeline: Callable[[Any], object], name: str) -> Ledger:
    """The ledger's count of the launches a graph of ``pipeline`` records, each checked as :func:`capture` does:
    on a GPU it counts the capture itself, in the simulator the launches made directly."""
    _check_pipeline(pipeline, "counted")
    if is_simulator():
        with Ledger(name) as ledger:
            _in_simulator(pipeline, run=True)  # the check first, then the count
        return ledger
    stream = default_stream()
    _direct(pipeline, stream)  # checked (and compiled) outside the capture
    with Ledger(name) as ledger:
        _record(pipeline, stream, name).close()
    return ledger


def host_us_per_call(call: Callable[[], object], stream: Any, *, burst: int = 50, repeats: int = 9) -> list[float]:
    """Host microseconds per call: bursts of ``burst`` calls issued back to back, then a wait."""
    samples = []
    for _ in range(repeats):
        stream.sync()
        started = time.perf_counter()
        for _ in range(burst):
            call()
        samples.append((time.perf_counter() - started) / burst * 1e6)
        stream.sync()
    return samples


def time_calls(call: Callable[[], object], stream: Any, *, label: str = "", repeats: int = 25,
               warmup: int = 3, burst: int = 50) -> Timed | None:
    """Time ``call`` (a replay, or direct launches) three ways, on the ``cuda.core`` ``stream`` its work runs on
    (:func:`legacy_stream` for Numba's, CuPy's and torch's default stream); ``None`` in the simulator, saying why."""
    if is_simulator():
        print(GRAPHS_NEED_GPU + ".")
        return None
    options = timing_event_options()
    for _ in range(warmup):
        call()
    stream.sync()
    host = host_us_per_call(call, stream, burst=burst)
    hold_us = max(MIN_HOLD_US, 5 * statistics.median(host))
    iterations = max(1, int(hold_us / us_per_hold_iteration()))
    hold = hold_kernel()
    loop, gpu = [], []
    for queued in (False, True):
        for _ in range(repeats):
            stream.sync()
            if queued:
                hold[1, 1, stream](iterations)
            start = stream.record(options=options)
            call()
            end = stream.record(options=options)
            end.sync()
            (gpu if queued else loop).append(end - start)
    return Timed(label, 0, host, loop, gpu, burst, hold_us)
