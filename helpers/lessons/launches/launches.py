"""Launches cost too: where a launch's host time goes, and fusion beside CUDA graphs.

Run it as ``python -m helpers.lessons.launches.launches --help``.  Two measurements:

1. **Host time per launch against the number of array arguments** (0 to 5), for a
   lazily compiled kernel (``@cuda.jit``), the same kernel compiled for an explicit
   signature, and a one-launch graph of it replayed.
2. **The 2x2 over sizes**: {three kernels, fused} x {launched directly, replayed as a
   graph}, n = 2^10 ... 2^28, beside CuPy's ``ElementwiseKernel``, torch eager and
   ``torch.compile`` in its default mode and with ``mode="reduce-overhead"`` (which
   replays CUDA graphs itself).  A peer that is not installed is reported absent.

Every variant is checked against NumPy at every size (fresh random inputs, outputs
poisoned with NaN first, and once at a size that is not a multiple of the block)
before it is timed.  The result is a typed record, ``results/<device>/launches.json``.
In the simulator the command checks the direct Numba variants at tiny sizes and
reports the graph variants as needing a GPU; it measures no times.
"""

from __future__ import annotations

import argparse
import copy
import faulthandler
import gc
import importlib
import importlib.util
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import matplotlib.pyplot as plt
import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import default_tolerance, random_inputs
from helpers.harness.device_checks import check_on_device, poison_on_device
from helpers.lessons.launches import graphs
from helpers.lessons.roofline import roofline
from helpers.pipeline import add_kernel, fused_kernel, multiply_kernel, reference, scale_kernel
from helpers.results import Claim, Provenance, Record, ResultError, folder_for, load, save
from helpers.sizes import BLOCK_SIZE, blocks_for

DTYPE = np.float32
GPU_SIZES = [2**k for k in range(10, 29)]
SIMULATOR_SIZES = [100, 300]
SIMULATOR_MAX_SIZE = 5000
MAX_ARRAYS = 5

THREE, FUSED = "three kernels", "fused"
DIRECT_THREE, DIRECT_FUSED = "numba three kernels", "numba fused"
GRAPH_THREE, GRAPH_FUSED = "numba three kernels + graph", "numba fused + graph"
GRAPH_BEST = "numba fused (best) + graph"
NUMBA_VARIANTS = (DIRECT_THREE, DIRECT_FUSED, GRAPH_THREE, GRAPH_FUSED, GRAPH_BEST)
RO, RO_STATIC = "torch.compile reduce-overhead", "torch.compile reduce-overhead, static inputs"
PEERS = ("cupy ElementwiseKernel", "torch eager", "torch.compile", RO, RO_STATIC)


# --- the record ----------------------------------------------------------------------------------


@dataclass
class ArgumentCost:
    """Host microseconds per launch of a kernel taking ``arrays`` array arguments (samples)."""

    arrays: int
    lazy_us: list[float]
    explicit_us: list[float]
    graph_us: list[float]  # one replay of a graph holding this one launch

    @property
    def lazy(self) -> float:
        return statistics.median(self.lazy_us)

    @property
    def explicit(self) -> float:
        return statistics.median(self.explicit_us)

    @property
    def graph(self) -> float:
        return statistics.median(self.graph_us)


@dataclass
class Variant:
    """One way of computing ``out``: what it is, and whether it ran here."""

    label: str
    traffic: str  # "three kernels" or "fused": whose memory traffic it has
    launches: int  # kernel launches per call (a graph replay is one call holding them)
    graph: bool  # replayed from a CUDA graph (recorded by us, or by torch)
    status: str = "ok"  # "ok", "absent" (cannot run here) or "failed" (wrong answer: never timed)
    reason: str | None = None
    note: str = ""


@dataclass
class Check:
    """One correctness check of a variant, before it was timed."""

    variant: str
    n: int
    passed: bool
    poisoned: bool
    error: str | None = None


@dataclass
class Timed:
    """A variant at one size: host microseconds per call, and CUDA-event milliseconds two ways."""

    variant: str
    n: int
    host_us: list[float]  # host time per call, bursts of back-to-back calls
    loop_ms: list[float]  # events around one call, GPU idle before it: what a Python loop sees
    gpu_ms: list[float]  # events around one call queued behind a hold: GPU work only
    burst: int
    hold_us: float

    @property
    def loop(self) -> float:
        return statistics.median(self.loop_ms)

    @property
    def gpu(self) -> float:
        return statistics.median(self.gpu_ms)

    @property
    def host(self) -> float:
        return statistics.median(self.host_us)


@dataclass
class Counted:
    """A pipeline's traffic, counted by the ledger on the launches a graph records."""

    launches: int
    trips: int
    bytes_per_element: float
    counted_by: str


@dataclass
class Settings:
    sizes: list[int]
    repeats: int
    burst_small: int
    burst_large: int
    argument_n: int
    block_size: int = BLOCK_SIZE
    dtype: str = "float32"
    timing: str = ("host_us: time.perf_counter over bursts of calls; loop_ms: CUDA events around one call "
                   "with the GPU idle before it (launch cost included); gpu_ms: CUDA events around one call "
                   "queued behind a hold kernel (launch cost hidden). Events on the stream the work runs on.")


@dataclass(kw_only=True)
class LaunchesRun(Record):
    """Host cost per launch against arguments, and the 2x2 of fusion and graphs over sizes."""

    SCHEMA: ClassVar[str] = "launches"
    VERSION: ClassVar[int] = 1
    simulated: bool
    note: str
    settings: Settings
    api: dict[str, str] = field(default_factory=dict)  # which cuda.core this ran on, import paths
    argument_costs: list[ArgumentCost] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)
    pipelines: dict[str, Counted] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    bitwise: dict[str, bool] = field(default_factory=dict)  # graph replay against direct launches
    timings: list[Timed] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    torch_counters: dict[str, int] = field(default_factory=dict)
    complete: bool = False
    elapsed_s: float = 0.0

    def timed(self, variant: str, n: int) -> Timed | None:
        return next((t for t in self.timings if t.variant == variant and t.n == n), None)

    def median(self, variant: str, n: int, mode: str = "loop") -> float | None:
        """Median ms (``loop`` or ``gpu``) or µs (``host``) of a variant at size n; None if not timed."""
        t = self.timed(variant, n)
        return None if t is None else getattr(t, mode)

    def measured(self) -> list[str]:
        """Labels of the variants with timings, in the order they ran."""
        return [v.label for v in self.variants if any(t.variant == v.label for t in self.timings)]

    def sizes(self) -> list[int]:
        return sorted({t.n for t in self.timings})


# --- host time per launch against the number of array arguments ---------------------------------


@cuda.jit
def args0():
    pass


@cuda.jit
def args1(x0):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = 1.0


@cuda.jit
def args2(x0, x1):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = x1[i]


@cuda.jit
def args3(x0, x1, x2):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = x1[i] + x2[i]


@cuda.jit
def args4(x0, x1, x2, x3):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = x1[i] + x2[i] + x3[i]


@cuda.jit
def args5(x0, x1, x2, x3, x4):
    i = cuda.grid(1)
    if i < x0.size:
        x0[i] = x1[i] + x2[i] + x3[i] + x4[i]


ARITY_KERNELS = (args0, args1, args2, args3, args4, args5)


def explicit_version(kernel: Any, arrays: int) -> Any:
    """The same Python kernel compiled eagerly for ``arrays`` contiguous float32 arrays."""
    signature = "void(" + ", ".join(["float32[::1]"] * arrays) + ")"
    return cuda.jit(signature)(kernel.py_func)


def measure_argument_costs(n: int = 1024, launches: int = 200, repeats: int = 9) -> list[ArgumentCost]:
    """Host µs per launch for 0..5 array arguments: lazy, explicit signature, and a one-launch graph."""
    if is_simulator():
        return []
    arrays = [cuda.to_device(x) for x in random_inputs(n, MAX_ARRAYS, dtype=DTYPE)]
    legacy = graphs.legacy_stream()
    blocks = blocks_for(n)
    costs = []
    for count, lazy in enumerate(ARITY_KERNELS):
        args = arrays[:count]
        explicit = explicit_version(lazy, count)
        graph = graphs.capture(lambda stream, k=lazy, a=args: k[blocks, BLOCK_SIZE, stream](*a), name=f"{count} arrays")

        def lazy_call(k: Any = lazy, a: list[Any] = args) -> None:
            k[blocks, BLOCK_SIZE](*a)

        def explicit_call(k: Any = explicit, a: list[Any] = args) -> None:
            k[blocks, BLOCK_SIZE](*a)

        row = []
        for call, stream in ((lazy_call, legacy), (explicit_call, legacy), (graph.replay, graph.stream)):
            for _ in range(20):
                call()
            row.append(graphs.host_us_per_call(call, stream, burst=launches, repeats=repeats))
        graph.close()
        costs.append(ArgumentCost(count, *row))
    return costs


def fit_per_argument(costs: Sequence[ArgumentCost], which: str = "lazy") -> tuple[float, float]:
    """Least-squares line through median host µs against arrays: (µs at 0 arrays, µs per array)."""
    x = np.array([c.arrays for c in costs], dtype=float)
    y = np.array([getattr(c, which) for c in costs])
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


# --- the 2x2 and its peers ----------------------------------------------------------------------


class Unavailable(RuntimeError):
    """A variant cannot run here (a peer not installed, or graphs in the simulator)."""


@dataclass
class Case:
    """One variant at one size: the call, the stream it runs on, where its answer lands."""

    call: Callable[[], Any]
    stream: Any  # cuda.core stream the work runs on (None in the simulator)
    output: Callable[[], Any]
    poison: Callable[[], None]
    poisoned: bool = True
    close: Callable[[], None] = lambda: None
    same_buffer: Callable[[], bool] | None = None  # for a library's own output: was the poisoned buffer reused?


class Pool:
    """Inputs, intermediates and output at the largest size; size n uses prefixes."""

    def __init__(self, n_max: int) -> None:
        self.host = random_inputs(n_max, dtype=DTYPE)  # a fresh draw every run
        self.s = DTYPE(np.random.default_rng().uniform(1.5, 4.0))
        self.a, self.b, self.c = (cuda.to_device(x) for x in self.host)
        self.t1, self.t2, self.out, self.expected = (cuda.device_array(n_max, DTYPE) for _ in range(4))

    def views(self, n: int) -> tuple[Any, ...]:
        return tuple(x[:n] for x in (self.a, self.b, self.c, self.t1, self.t2, self.out))

    def load_expected(self, n: int) -> None:
        self.expected[:n].copy_to_device(reference(*(x[:n] for x in self.host), self.s))


def three_pipeline(a: Any, b: Any, c: Any, s: Any, t1: Any, t2: Any, out: Any) -> Callable[[Any], None]:
    """The three launches as a function of a stream (so they run directly or are captured)."""
    blocks = blocks_for(out.size)

    def pipeline(stream: Any) -> None:
        add_kernel[blocks, BLOCK_SIZE, stream](a, b, t1)
        multiply_kernel[blocks, BLOCK_SIZE, stream](t1, c, t2)
        scale_kernel[blocks, BLOCK_SIZE, stream](t2, s, out)

    return pipeline


def fused_pipeline(a: Any, b: Any, c: Any, s: Any, out: Any) -> Callable[[Any], None]:
    blocks = blocks_for(out.size)

    def pipeline(stream: Any) -> None:
        fused_kernel[blocks, BLOCK_SIZE, stream](a, b, c, s, out)

    return pipeline


def _numba(pool: Pool, label: str) -> Callable[[int], Case]:
    graph = label in (GRAPH_THREE, GRAPH_FUSED)
    if graph and is_simulator():
        raise Unavailable(graphs.GRAPHS_NEED_GPU)

    def case(n: int) -> Case:
        a, b, c, t1, t2, out = pool.views(n)
        three = label in (DIRECT_THREE, GRAPH_THREE)
        pipeline = three_pipeline(a, b, c, pool.s, t1, t2, out) if three else fused_pipeline(a, b, c, pool.s, out)
        poison = (lambda: poison_on_device(t1, t2, out)) if three else (lambda: poison_on_device(out))
        if not graph:  # as a learner writes it: no stream, Numba's default stream
            stream = None if is_simulator() else graphs.legacy_stream()
            return Case(lambda: pipeline(0), stream, lambda: out, poison)
        captured = graphs.capture(pipeline, name=label)
        return Case(captured.replay, captured.stream, lambda: out, poison, close=captured.close)

    return case


def _best_graph(pool: Pool) -> Callable[[int], Case]:
    """The fastest fused variant of notebook 07 (16-byte loads where it can), recorded as a graph."""
    if is_simulator():
        raise Unavailable(graphs.GRAPHS_NEED_GPU)
    name = roofline.best_variant_name()
    launch = roofline.VARIANTS[name]

    def case(n: int) -> Case:
        a, b, c, _, _, out = pool.views(n)
        captured = graphs.capture(lambda stream: launch(a, b, c, pool.s, out), name=GRAPH_BEST,
                                  adopt_default_stream=True)  # its launcher takes no stream
        return Case(captured.replay, captured.stream, lambda: out, lambda: poison_on_device(out), close=captured.close)

    return case


def _require(name: str) -> Any:
    if is_simulator():
        raise Unavailable(f"{name} needs a GPU (this is the simulator)")
    if importlib.util.find_spec(name) is None:
        raise Unavailable(f"{name} is not installed")
    try:
        return importlib.import_module(name)
    except Exception as error:  # a broken install is reported, not fatal
        raise Unavailable(f"{name} failed to import: {error}") from None


def _cupy(pool: Pool) -> Callable[[int], Case]:
    cupy = _require("cupy")
    kernel = cupy.ElementwiseKernel("float32 a, float32 b, float32 c, float32 s", "float32 out",
                                    "out = (a + b) * c / s", "abc_one_launch")
    full = [cupy.asarray(x) for x in (pool.a, pool.b, pool.c, pool.out)]

    def case(n: int) -> Case:
        a, b, c, out = (x[:n] for x in full)
        out_numba = pool.out[:n]
        return Case(lambda: kernel(a, b, c, pool.s, out), graphs.legacy_stream(), lambda: out_numba,
                    lambda: poison_on_device(out_numba))

    return case


def _torch_eager(pool: Pool) -> Callable[[int], Case]:
    torch = _require("torch")
    full = [torch.as_tensor(x, device="cuda") for x in pool.views(len(pool.a))]

    def case(n: int) -> Case:
        a, b, c, t1, t2, out = (x[:n] for x in full)
        s = float(pool.s)

        def call() -> None:
            torch.add(a, b, out=t1)
            torch.mul(t1, c, out=t2)
            torch.div(t2, s, out=out)

        views = pool.views(n)
        return Case(call, graphs.legacy_stream(), lambda: out, lambda: poison_on_device(*views[3:]))

    return case


TORCH_DYNAMIC_ENV = "LAUNCHES_TORCH_DYNAMIC"
"""Set to ``0`` to compile torch's expression per size (``dynamic=False``) instead of once for any size."""


def torch_dynamic() -> bool:
    """Whether torch.compile is asked for one graph for every size (the default) or one per size."""
    value = os.environ.get(TORCH_DYNAMIC_ENV, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{TORCH_DYNAMIC_ENV} must be 0 or 1, got {value!r}")
    return value == "1"


def _torch_compiled(pool: Pool, mode: str | None, static: bool = False) -> Callable[[int], Case]:
    """torch.compile of the expression; ``static`` marks a, b and c as staying at their addresses.

    In ``reduce-overhead`` mode torch replays a CUDA graph recorded on buffers of its own,
    and copies each input that is not marked static into them before every replay.
    """
    torch = _require("torch")
    dynamic = torch_dynamic()
    if not dynamic:  # one compilation per size: let every size of the sweep have its own
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    full = [torch.as_tensor(x, device="cuda") for x in (pool.a, pool.b, pool.c)]
    s = float(pool.s)  # baked in as a constant, as a graph bakes in its scalars

    def views(n: int) -> list[Any]:
        parts = [x[:n] for x in full]
        if static:  # the views keep their addresses from call to call: no copy into torch's own buffers
            for part in parts:
                torch._dynamo.mark_static_address(part, guard=False)
        return parts

    def expression(a: Any, b: Any, c: Any) -> Any:
        return (a + b) * c / s

    # Free what earlier stages left for the garbage collector now: a CUDA object destroyed while torch
    # records its own graph would break that recording.
    gc.collect()
    cuda.synchronize()
    compiled = torch.compile(expression, dynamic=dynamic, **({"mode": mode} if mode else {}))
    step = torch.compiler.cudagraph_mark_step_begin if mode == "reduce-overhead" else (lambda: None)
    started = time.perf_counter()
    for _ in range(3):  # reduce-overhead records its graph on a later call than the first
        step()
        compiled(*views(1000))
    torch.cuda.synchronize()
    print(f"torch.compile {mode or 'default'} (dynamic={dynamic}): ready in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)

    def case(n: int) -> Case:
        a, b, c = views(n)
        last: list[Any] = []

        def call() -> None:
            step()
            last[:] = [compiled(a, b, c)]

        poisoned_at: list[int] = []

        def poison() -> None:  # the output is torch's own buffer: fill the last one, torch may reuse it
            if last:
                last[0].fill_(float("nan"))
                poisoned_at[:] = [last[0].data_ptr()]

        def same_buffer() -> bool:
            return bool(last) and poisoned_at == [last[0].data_ptr()]

        return Case(call, graphs.legacy_stream(), lambda: last[0], poison, same_buffer=same_buffer)

    return case


FACTORIES: dict[str, tuple[Variant, Callable[[Pool], Callable[[int], Case]]]] = {
    DIRECT_THREE: (Variant(DIRECT_THREE, THREE, 3, False, note="add, multiply, scale: 3 launches"),
                   lambda p: _numba(p, DIRECT_THREE)),
    DIRECT_FUSED: (Variant(DIRECT_FUSED, FUSED, 1, False, note="one launch"), lambda p: _numba(p, DIRECT_FUSED)),
    GRAPH_THREE: (Variant(GRAPH_THREE, THREE, 3, True, note="the 3 launches recorded once, replayed"),
                  lambda p: _numba(p, GRAPH_THREE)),
    GRAPH_FUSED: (Variant(GRAPH_FUSED, FUSED, 1, True, note="the fused launch recorded once, replayed"),
                  lambda p: _numba(p, GRAPH_FUSED)),
    GRAPH_BEST: (Variant(GRAPH_BEST, FUSED, 1, True, note="helpers.lessons.roofline.roofline's best fused variant, recorded once, replayed"),
                 _best_graph),
    "cupy ElementwiseKernel": (Variant("cupy ElementwiseKernel", FUSED, 1, False, note="one generated kernel"), _cupy),
    "torch eager": (Variant("torch eager", THREE, 3, False, note="torch.add/mul/div with out="), _torch_eager),
    "torch.compile": (Variant("torch.compile", FUSED, 1, False, note="Inductor/Triton, dynamic=True"),
                      lambda p: _torch_compiled(p, None)),
    RO: (
        Variant(RO, FUSED, 1, True,
                note="Inductor/Triton, dynamic=True, mode='reduce-overhead': torch records and replays CUDA graphs, "
                     "copying its inputs into the graph's own buffers first"),
        lambda p: _torch_compiled(p, "reduce-overhead")),
    RO_STATIC: (
        Variant(RO_STATIC, FUSED, 1, True,
                note="as reduce-overhead, with a, b and c marked static (torch._dynamo.mark_static_address): "
                     "the graph reads them where they are"),
        lambda p: _torch_compiled(p, "reduce-overhead", static=True)),
}
KEYS = {"three": DIRECT_THREE, "fused": DIRECT_FUSED, "three-graph": GRAPH_THREE, "fused-graph": GRAPH_FUSED,
        "best-graph": GRAPH_BEST,
        "cupy": "cupy ElementwiseKernel", "torch": "torch eager", "compile": "torch.compile",
        "compile-ro": RO, "compile-ro-static": RO_STATIC}


def verify(case: Case, label: str, n: int, expected: Any) -> Check:
    """Run, poison the output, run again, and compare with NumPy's answer."""
    case.call()
    cuda.synchronize()
    case.poison()
    cuda.synchronize()
    case.call()
    cuda.synchronize()
    got = case.output()
    if case.same_buffer is not None:  # the answer landed in the buffer poisoned before, or in a fresh one
        case.poisoned = case.same_buffer()
    got = got if hasattr(got, "copy_to_host") else cuda.as_cuda_array(got)
    check_on_device(got, expected, name=f"{label} at n={n}", rtol=default_tolerance(DTYPE))
    return Check(label, n, True, case.poisoned)


def count_pipelines(n: int = 1000) -> dict[str, Counted]:
    """Trips of both pipelines, counted by the ledger on the launches a graph of each records."""
    a, b, c = (cuda.to_device(x) for x in random_inputs(n, dtype=DTYPE))
    t1, t2, out = (cuda.device_array(n, DTYPE) for _ in range(3))
    counted = {}
    for name, pipeline in ((THREE, three_pipeline(a, b, c, DTYPE(2.0), t1, t2, out)),
                           (FUSED, fused_pipeline(a, b, c, DTYPE(2.0), out))):
        ledger = graphs.counted(pipeline, name)
        counted[name] = Counted(len(ledger.launches), ledger.trips, ledger.bytes_per_element(), ledger.counted_by())
    return counted


def api_facts() -> dict[str, str]:
    """Which cuda.core this is, and where its pieces were found."""
    facts = {"numba-cuda": _version("numba-cuda"), "cuda-core": _version("cuda-core") or _version("cuda_core")}
    if not is_simulator():
        module = graphs.core()
        facts["cuda.core module"] = module.__name__
        facts["GraphBuilder"] = f"{graphs.graph_builder_type().__module__}.GraphBuilder"
    return {k: str(v) for k, v in facts.items()}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def check_bitwise(n: int = 1024 + 3) -> dict[str, bool]:
    """Graph replays give bit-for-bit the result of the same launches made directly."""
    if is_simulator():
        return {}
    a, b, c = (cuda.to_device(x) for x in random_inputs(n, dtype=DTYPE))
    t1, t2, direct, replayed = (cuda.device_array(n, DTYPE) for _ in range(4))
    s = DTYPE(3.0)
    found = {}
    for name, make in ((THREE, lambda out: three_pipeline(a, b, c, s, t1, t2, out)),
                       (FUSED, lambda out: fused_pipeline(a, b, c, s, out))):
        make(direct)(0)
        cuda.synchronize()
        poison_on_device(replayed)
        cuda.synchronize()
        graph = graphs.capture(make(replayed), warm_up=False)
        graph.run()
        found[f"{name} at n={n}"] = bool(np.array_equal(direct.copy_to_host(), replayed.copy_to_host()))
        graph.close()
    return found


def _burst(n: int, small: int, large: int) -> int:
    return small if n <= 2**22 else large


def run(sizes: Sequence[int] | None = None, labels: Sequence[str] | None = None, *, repeats: int = 25,
        burst_small: int = 30, burst_large: int = 10, arguments: bool = True, progress: bool = True,
        checkpoint: Callable[[LaunchesRun], object] | None = None) -> LaunchesRun:
    """Measure both parts; every variant checked against NumPy before it is timed."""
    simulated = is_simulator()
    sizes = sorted(set(sizes or (SIMULATOR_SIZES if simulated else GPU_SIZES)))
    if simulated and max(sizes) > SIMULATOR_MAX_SIZE:
        raise ValueError(f"size {max(sizes)} is too large for the simulator; use sizes up to {SIMULATOR_MAX_SIZE}")
    labels = list(labels or FACTORIES)
    started = time.perf_counter()
    record = LaunchesRun(
        simulated=simulated,
        note=("SIMULATED: correctness of the direct launches only; graphs need a GPU and no times were measured"
              if simulated else "host wall clock and CUDA events; every sample kept"),
        settings=Settings(sizes=sizes, repeats=repeats, burst_small=burst_small, burst_large=burst_large,
                          argument_n=1024),
        api=api_facts(),
    )
    def stage(what: str) -> None:
        if progress:
            print(f"{what} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        if checkpoint is not None:  # a run cut short still leaves its measurements, and what they say
            record.claims = claims(record)
            record.elapsed_s = round(time.perf_counter() - started, 1)
            checkpoint(record)

    record.pipelines = count_pipelines()
    if arguments:
        record.argument_costs = measure_argument_costs()
    record.bitwise = check_bitwise()
    stage("launch cost against arguments: done")
    n_max = max(sizes)
    pool = Pool(n_max)
    builders: dict[str, Callable[[int], Case]] = {}

    def set_up(label: str) -> None:
        variant, factory = FACTORIES[label]
        variant = Variant(**vars(variant))
        if label.startswith("torch.compile"):
            variant.note = variant.note.replace("dynamic=True", f"dynamic={torch_dynamic()}")
        try:
            builders[label] = factory(pool)
        except Unavailable as why:
            variant.status, variant.reason = "absent", str(why)
        except Exception as error:  # a peer that cannot be set up is reported, not fatal
            variant.status, variant.reason = "absent", f"setup failed: {type(error).__name__}: {error}"
        record.variants.append(variant)
        if variant.reason and progress:
            print(f"{label}: {variant.reason}", file=sys.stderr)
        stage(f"{label}: set up")

    def checked(label: str, n: int) -> Case | None:
        """The variant's case at size n once it has passed its check; None (and never timed) if not."""
        case = None
        try:
            case = builders[label](n)  # a graph is recorded here: a capture that fails counts as a failure
            record.checks.append(verify(case, label, n, pool.expected[:n]))
            return case
        except Exception as error:  # a wrong answer, or a peer breaking at a new size: never timed
            poisoned = case.poisoned if case is not None else False
            record.checks.append(Check(label, n, False, poisoned, f"{type(error).__name__}: {error}"))
            variant = next(v for v in record.variants if v.label == label)
            variant.status, variant.reason = "failed", str(error)
            del builders[label]
            if case is not None:
                case.close()
            print(f"{label} is wrong at n={n}; not timed: {error}", file=sys.stderr)
            return None

    def measure(group: list[str]) -> None:
        """Set up, check at an awkward size, then check and time at every size."""
        builders.clear()
        for label in group:
            set_up(label)
        pool.load_expected(odd)
        for label in list(builders):
            if (case := checked(label, odd)) is not None:
                case.close()
        for n in sizes:
            pool.load_expected(n)
            for label in list(builders):
                case = checked(label, n)
                if case is None:
                    continue
                if not simulated:
                    burst = _burst(n, burst_small, burst_large)
                    t = graphs.time_calls(case.call, case.stream, label=label, repeats=repeats, burst=burst)
                    assert t is not None
                    record.timings.append(Timed(label, n, _round(t.host_us), _round(t.loop_ms), _round(t.gpu_ms),
                                                burst, round(t.hold_us, 1)))
                case.close()
            stage(f"n = {power(n)}: {', '.join(builders) or 'nothing'} done")

    odd = n_max - 3 if n_max > 3 else n_max  # not a multiple of the block: the bounds guard is exercised
    slow = [label for label in labels if label.startswith("torch.compile")]  # compiling takes seconds
    measure([label for label in labels if label not in slow])
    if slow:
        # torch.compile may record CUDA graphs of its own: a buffer freed by Numba meanwhile would be
        # a forbidden call during that recording, so Numba's frees wait until the group is done.
        with cuda.defer_cleanup():
            measure(slow)
    if "torch" in sys.modules:
        try:
            counters = sys.modules["torch"]._dynamo.utils.counters
            record.torch_counters = {f"{group}.{k}": int(v) for group in ("inductor",) for k, v in counters[group].items()}
        except Exception:  # only a diagnostic
            pass
    record.claims = claims(record)
    record.complete = True
    record.elapsed_s = round(time.perf_counter() - started, 1)
    return record


def _round(samples: Sequence[float]) -> list[float]:
    return [float(f"{x:.6g}") for x in samples]


# --- what the measurements say ------------------------------------------------------------------


def power(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def claims(record: LaunchesRun) -> list[Claim]:
    """The statements about this GPU that the notebook makes, each checked against the data."""
    out: list[Claim] = []
    sizes = record.sizes()
    if not sizes:
        return [Claim("graphs and fusion", None, "", None, "nothing timed (simulator)")]
    small, large = sizes[0], sizes[-1]

    def med(label: str, n: int, mode: str = "loop") -> float | None:
        return record.median(label, n, mode)

    host = med(GRAPH_THREE, 1024, "host")
    out.append(Claim("host time per replay of the three-kernel graph <= 8 us at n=1024", host, "<= 8 us",
                     None if host is None else host <= 8.0, "" if host is None else f"{host:.1f} us"))
    fg, cp = med(GRAPH_FUSED, small), med("cupy ElementwiseKernel", small)
    out.append(Claim(f"fused + graph takes no more time than CuPy's one launch at {power(small)}",
                     None if fg is None or cp is None else fg / cp, "<= 1",
                     None if fg is None or cp is None else fg <= cp,
                     "" if fg is None or cp is None else f"{fg * 1e3:.1f} us against {cp * 1e3:.1f} us"))
    for mine, peers in ((GRAPH_FUSED, (DIRECT_THREE, DIRECT_FUSED, GRAPH_THREE, *PEERS)), (GRAPH_BEST, PEERS)):
        for peer in peers:
            timed = [n for n in sizes if med(peer, n) is not None and med(mine, n) is not None]
            if not timed:
                continue
            faster = [n for n in timed if med(peer, n) < med(mine, n)]  # type: ignore[operator]
            worst = max(timed, key=lambda n: med(mine, n) / med(peer, n))  # type: ignore[operator]
            ratio = med(mine, worst) / med(peer, worst)  # type: ignore[operator]
            short = mine.removeprefix("numba ")
            note = (f"{peer} is faster at no size; at most {short} takes {ratio:.2f}x its time, at {power(worst)}"
                    if not faster else
                    f"{peer} is faster at {len(faster)} of {len(timed)} sizes ({', '.join(map(power, faster))}); "
                    f"at worst {short} takes {ratio:.2f}x its time, at {power(worst)}")
            out.append(Claim(f"{short} is no slower than {peer} at every n from {power(small)} to {power(large)}",
                             ratio, "<= 1.00x at every n", not faster, note))
    d3, g3 = med(DIRECT_THREE, small), med(GRAPH_THREE, small)
    if d3 and g3:
        out.append(Claim(f"a graph makes the three kernels >= 3x faster at {power(small)}", d3 / g3, ">= 3x",
                         d3 / g3 >= 3, f"{d3 / g3:.1f}x"))
    d3, g3 = med(DIRECT_THREE, large), med(GRAPH_THREE, large)
    if d3 and g3:
        out.append(Claim(f"a graph changes the three kernels' time by less than 5% at {power(large)}", g3 / d3,
                         "within 5%", abs(g3 / d3 - 1) < 0.05, f"{g3 / d3:.3f}x"))
    f1, g3 = med(DIRECT_FUSED, large), med(GRAPH_THREE, large)
    if f1 and g3:
        out.append(Claim(f"fusion without a graph beats a graph without fusion at {power(large)}", g3 / f1, "> 1x",
                         f1 < g3, f"{g3 / f1:.2f}x"))
    return out


# --- plots ------------------------------------------------------------------------------------------

COLORS = {DIRECT_THREE: "#c44e52", DIRECT_FUSED: "#4c72b0", GRAPH_THREE: "#e8a09a", GRAPH_FUSED: "#1f3f7a",
          GRAPH_BEST: "#000000",
          "cupy ElementwiseKernel": "#55a868", "torch eager": "#dd8452", "torch.compile": "#8172b3",
          RO: "#3b2a80", RO_STATIC: "#c44e52"}


def plot_argument_costs(record: LaunchesRun) -> Any:
    """Host µs per launch against array arguments: lazy, explicit signature, graph replay."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    costs = record.argument_costs
    if not costs:
        ax.text(0.5, 0.5, "not measured here (needs a GPU)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    x = [c.arrays for c in costs]
    for which, label, style in (("lazy", "@cuda.jit (lazy)", "o-"), ("explicit", "explicit signature", "s--"),
                                ("graph", "graph of that one launch, replayed", "^-")):
        _ = ax.plot(x, [getattr(c, which) for c in costs], style, label=label)
    ax.set_xlabel("array arguments")
    ax.set_ylabel("host time per launch (µs)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"one launch at n = {record.settings.argument_n}")
    fig.tight_layout()
    return fig


def plot_two_by_two(record: LaunchesRun, mode: str = "loop", labels: Sequence[str] | None = None) -> Any:
    """Time per call against n for every timed variant (log-log)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    labels = list(labels or record.measured())
    if not labels:
        ax.text(0.5, 0.5, "no timings here (needs a GPU)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    for label in labels:
        points = [(t.n, getattr(t, mode) * 1e3) for t in record.timings if t.variant == label]
        if points:
            xs, ys = zip(*sorted(points))
            style = "-" if label in NUMBA_VARIANTS else ":"
            width = 2.4 if label in NUMBA_VARIANTS else 1.4
            _ = ax.plot(xs, ys, style, marker="o", markersize=3, lw=width, label=label, color=COLORS.get(label))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (float32 elements)")
    ax.set_ylabel("time per call (µs)" + (", launch included" if mode == "loop" else ", GPU only"))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def table(record: LaunchesRun, sizes: Sequence[int] = (2**10, 2**20, 2**28), mode: str = "loop") -> str:
    """Median time per call of every timed variant at a few sizes."""
    labels = record.measured()
    if not labels:
        return "no timings: " + record.note
    rows = [["variant"] + [power(n) for n in sizes]]
    for label in labels:
        cells = []
        for n in sizes:
            m = record.median(label, n, mode)
            cells.append("-" if m is None else (f"{m * 1e3:.1f} µs" if m < 1 else f"{m:.3f} ms"))
        rows.append([label] + cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows)


def argument_table(record: LaunchesRun) -> str:
    if not record.argument_costs:
        return "host time per launch: not measured (needs a GPU)"
    lines = ["arrays  lazy @cuda.jit  explicit signature  graph replay"]
    for c in record.argument_costs:
        lines.append(f"{c.arrays:6d}  {c.lazy:11.1f} µs  {c.explicit:15.1f} µs  {c.graph:9.1f} µs")
    return "\n".join(lines)


# --- command line -----------------------------------------------------------------------------------


def parse_sizes(text: str) -> list[int]:
    """``2^10..2^28`` (every power), ``2^10..2^28:2`` (every other) or a list such as ``1000,2^20``."""
    sizes: set[int] = set()
    for token in (t.strip() for t in text.split(",") if t.strip()):
        try:
            if ".." in token:
                low, high = token.split("..")
                step = 1
                if ":" in high:
                    high, step_text = high.split(":")
                    step = int(step_text)
                first, last = int(low.removeprefix("2^")), int(high.removeprefix("2^"))
                if not (low.startswith("2^") and high.startswith("2^")) or first > last or step < 1:
                    raise ValueError
                sizes.update(2**k for k in range(first, last + 1, step))
            elif token.startswith("2^"):
                sizes.add(2 ** int(token[2:]))
            else:
                sizes.add(int(token))
        except ValueError:
            raise ValueError(f"cannot read size {token!r}: use 1000, 2^20 or 2^10..2^28[:STEP]") from None
    if not sizes or min(sizes) < 1:
        raise ValueError("sizes must be positive")
    if max(sizes) > 2**30:
        raise ValueError("sizes above 2^30 do not fit the GPU's memory")
    return sorted(sizes)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.lessons.launches.launches",
        description="Host time per launch against array arguments, and {three kernels, fused} x "
                    "{direct, CUDA graph} over sizes beside CuPy and torch.",
    )
    parser.add_argument("--sizes", default=None, help="2^10..2^28 (the GPU default), 2^10..2^28:2, or 1000,2^20")
    parser.add_argument("--impl", default="all", help=f"comma-separated from {', '.join(KEYS)}; or 'all'")
    parser.add_argument("--repeats", type=int, default=25, help="timed repeats per size and mode")
    parser.add_argument("--no-arguments", action="store_true", help="skip host time against array arguments")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/<device>)")
    parser.add_argument("--no-plots", action="store_true", help="write JSON only")
    parser.add_argument("--merge", action="store_true",
                        help="add these variants to the result already in the output folder (a separate process "
                             "per peer keeps one that fails from taking the others with it)")
    return parser


def merge(previous: LaunchesRun, new: LaunchesRun) -> LaunchesRun:
    """``previous`` with ``new``'s variants added (a variant measured again replaces its old rows)."""
    labels = {v.label for v in new.variants}
    previous.variants = [v for v in previous.variants if v.label not in labels] + new.variants
    previous.checks = [c for c in previous.checks if c.variant not in labels] + new.checks
    previous.timings = [t for t in previous.timings if t.variant not in labels] + new.timings
    previous.settings.sizes = sorted(set(previous.settings.sizes) | set(new.settings.sizes))
    previous.torch_counters.update(new.torch_counters)
    previous.complete = previous.complete and new.complete
    previous.elapsed_s = round(previous.elapsed_s + new.elapsed_s, 1)
    previous.claims = claims(previous)
    return previous


def main(argv: Sequence[str] | None = None) -> int:
    if hasattr(signal, "SIGUSR1"):  # `timeout -s USR1` then prints where a stuck run is, every thread
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        sizes = parse_sizes(args.sizes) if args.sizes else None
        keys = list(KEYS) if args.impl.strip() == "all" else [k.strip() for k in args.impl.split(",") if k.strip()]
        unknown = [k for k in keys if k not in KEYS]
        if unknown or not keys:
            raise ValueError(f"unknown variant(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(KEYS)}")
        if args.repeats < 1:
            raise ValueError("--repeats must be at least 1")
    except ValueError as error:
        parser.error(str(error))
    if is_simulator():
        print("backend: simulator -- checks the direct launches at tiny sizes; graphs and times need a GPU")
    try:
        previous = load(LaunchesRun, args.out or folder_for(Provenance.here())) if args.merge else None
    except ResultError as missing:
        parser.error(f"--merge needs an earlier result to add to: {missing}")

    def keep(partial: LaunchesRun) -> Path:
        if previous is None:
            return save(partial, args.out)
        return save(merge(copy.deepcopy(previous), partial), args.out)

    record = run(sizes, [KEYS[k] for k in keys], repeats=args.repeats,
                 arguments=not args.no_arguments and previous is None, checkpoint=keep)
    if previous is not None:
        record = merge(previous, record)
    path = save(record, args.out)
    print(f"wrote {path}")
    if not args.no_plots and not record.simulated:
        for name, fig in (("launches_arguments", plot_argument_costs(record)),
                          ("launches_two_by_two", plot_two_by_two(record))):
            png = path.parent / f"{name}.png"
            fig.savefig(png, dpi=120)
            print(f"wrote {png}")
    print("api:", record.api)
    print("counted:", {k: f"{v.launches} launches, {v.trips} trips, {v.bytes_per_element:g} B/element"
                       for k, v in record.pipelines.items()})
    print("graph replay bitwise equal to direct launches:", record.bitwise)
    print(argument_table(record))
    if record.argument_costs:
        for which in ("lazy", "explicit", "graph"):
            base, slope = fit_per_argument(record.argument_costs, which)
            print(f"{which}: {base:.1f} µs + {slope:.2f} µs per array argument")
    print(table(record))
    print(table(record, mode="gpu").replace("variant", "variant (GPU time)", 1))
    for v in record.variants:
        if v.status != "ok":
            print(f"{v.label}: {v.status}: {v.reason}")
    for claim in record.claims:
        print(claim.line())
    if record.torch_counters:
        print("torch inductor counters:", record.torch_counters)
    failed = [c for c in record.checks if not c.passed]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
