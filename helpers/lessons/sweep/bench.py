"""The size sweep: ``out = (a + b) * c / s`` from n = 2^10 to 2^28, Numba against its peers.

Run it as ``make bench`` or ``python -m helpers.lessons.sweep.bench --help``.  For every size and
every implementation it

1. checks the result against NumPy on fresh random inputs, with the output
   poisoned (NaN) first, before anything is timed;
2. times it with CUDA events in three modes (see :data:`helpers.lessons.sweep.analysis.MODES`):
   ``loop`` (what a Python loop sees, launch overhead included), ``gpu`` (GPU time
   only, L2 warm) and ``gpu_cold`` (GPU time only, L2 flushed first);
3. writes every sample, the provenance and what it checked about the GPU to
   ``results/<device>/bench_sweep.json``, then plots.

Memory is allocated once at the largest size; a smaller size uses prefix views,
which stay contiguous (and 256-byte aligned).  In the CUDA simulator the command
runs a tiny sweep that checks correctness only and is labelled simulated: it
reports no times, because the simulator's times say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from numba import cuda
from tqdm.auto import tqdm

from helpers.backend import is_simulator
from helpers.checks import CheckFailed, default_tolerance, random_inputs
from helpers.device import device_name, l2_bytes, sm_count
from helpers.harness.device_checks import check_on_device, poison_on_device
from helpers.ledger import Ledger
from helpers.lessons.launches import graphs
from helpers.lessons.roofline import roofline
from helpers.lessons.sweep import analysis as sa
from helpers.lessons.sweep import plots as sweep_plots
from helpers.lessons.sweep.record import (
    ImplementationInfo,
    LauncherCost,
    LaunchOverhead,
    Measurement,
    PipelineTraffic,
    Sweep,
    SweepSettings,
    Verification,
)
from helpers.pipeline import (
    add_kernel,
    fused_kernel,
    multiply_kernel,
    reference,
    run_fused,
    run_three_kernels,
    scale_kernel,
)
from helpers.results import Claim, save
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import (
    MIN_HOLD_US,
    SIMULATOR_MESSAGE,
    Timing,
    event_samples,
    format_ms,
    host_enqueue_us,
    library_copy,
    time_gpu,
)

DTYPE = np.float32
GPU_SIZES = [2**k for k in range(10, 29)]
SIMULATOR_SIZES = [100, 300]
SIMULATOR_MAX_SIZE = 5000  # the simulator runs a few thousand GPU threads per second
DEFAULT_REPEATS = 25
DEFAULT_WARMUP = 3
CPU_BUDGET_S = 1.0  # NumPy at large n: as many repeats as fit in this, at least MIN_CPU_REPEATS
MIN_CPU_REPEATS = 3
FLUSH_FACTOR = 4  # the L2 flush reads this many L2 sizes of other data

# Figures an earlier probe of this project measured on an H200 at n = 2^28 (design/series.md,
# "Facts measured"): a sweep on an H200 is expected to reproduce each within 10 %.
EARLIER_H200 = {
    "device": "NVIDIA H200",
    "n": 2**28,
    "times_ms": {"numba three kernels": 2.72, "numba fused": 1.165, "torch.compile": 1.03,
                 "cupy ElementwiseKernel": 1.29, "torch eager": 1.99},
    "copy_gbs": 4277.0,
    "tolerance": 0.10,
    "min_speedup": 2.0,
}


class Unavailable(RuntimeError):
    """An optional implementation cannot run here (not installed, or needs a GPU)."""


# --- small kernels the benchmark itself needs -------------------------------------------


@cuda.jit
def _read_all(buffer, sink):
    """Read every element (grid-stride): evicts other data from L2 and leaves only clean lines."""
    total = 0.0
    for i in range(cuda.grid(1), buffer.size, cuda.gridsize(1)):
        total += buffer[i]
    if total == -1.0:  # never true for the zero-filled buffer; stops the reads being removed
        sink[0] = total


# --- implementations ------------------------------------------------------------------


@dataclass
class Case:
    """One implementation at one size: what to time, where its answer lands, how to poison it."""

    run: Callable[[], Any]
    output: Callable[[], Any]  # the last run's result: a device array, a CAI object or a host array
    poison: Callable[[], None]
    expected: Any  # device array holding the right answer
    poisoned: bool = True  # False where the output is a fresh allocation we cannot pre-fill


@dataclass(frozen=True)
class Implementation:
    key: str  # the name on the command line
    label: str  # the name in results and plots
    device: str  # "gpu" or "cpu"
    traffic: str  # the counted pipeline whose memory traffic it shares: "three kernels", "fused" or "copy"
    note: str
    factory: Callable[["Pool"], Callable[[int], Case]]


class Pool:
    """Inputs and outputs allocated once at the largest size; size n uses the first n elements."""

    def __init__(self, n_max: int) -> None:
        self.n_max = n_max
        self.host = random_inputs(n_max, dtype=DTYPE)  # fresh draw, values in [0.5, 2)
        self.s = DTYPE(np.random.default_rng().uniform(1.5, 4.0))
        self.a, self.b, self.c = (cuda.to_device(x) for x in self.host)
        self.t1, self.t2, self.out, self.expected = (cuda.device_array(n_max, DTYPE) for _ in range(4))
        self.expected_n = 0

    def views(self, n: int) -> tuple[Any, ...]:
        """a, b, c, t1, t2, out of length n (contiguous prefixes)."""
        return tuple(x[:n] for x in (self.a, self.b, self.c, self.t1, self.t2, self.out))

    def load_expected(self, n: int) -> np.ndarray:
        """NumPy's answer at size n, kept on the device for the comparisons."""
        answer = reference(*(x[:n] for x in self.host), self.s)
        self.expected[:n].copy_to_device(answer)
        self.expected_n = n
        return answer


def _numba_three(pool: Pool) -> Callable[[int], Case]:
    def case(n: int) -> Case:
        a, b, c, t1, t2, out = pool.views(n)
        blocks, s = blocks_for(n), pool.s

        def run() -> None:  # exactly as a learner writes it: three launches
            add_kernel[blocks, BLOCK_SIZE](a, b, t1)
            multiply_kernel[blocks, BLOCK_SIZE](t1, c, t2)
            scale_kernel[blocks, BLOCK_SIZE](t2, s, out)

        return Case(run, lambda: out, lambda: poison_on_device(t1, t2, out), pool.expected[:n])

    return case


def _numba_fused(pool: Pool) -> Callable[[int], Case]:
    def case(n: int) -> Case:
        a, b, c, _, _, out = pool.views(n)
        blocks, s = blocks_for(n), pool.s
        return Case(lambda: fused_kernel[blocks, BLOCK_SIZE](a, b, c, s, out), lambda: out,
                    lambda: poison_on_device(out), pool.expected[:n])

    return case


def _numba_graph(three: bool) -> Callable[[Pool], Callable[[int], Case]]:
    """The Numba pipeline recorded once as a CUDA graph (helpers.lessons.launches.graphs), replayed on the default stream."""

    def factory(pool: Pool) -> Callable[[int], Case]:
        if is_simulator():
            raise Unavailable(graphs.GRAPHS_NEED_GPU)
        default = graphs.legacy_stream()  # replays queue where the events and the other launches are

        def case(n: int) -> Case:
            a, b, c, t1, t2, out = pool.views(n)
            blocks, s = blocks_for(n), pool.s

            def pipeline(stream: Any) -> None:
                if three:
                    add_kernel[blocks, BLOCK_SIZE, stream](a, b, t1)
                    multiply_kernel[blocks, BLOCK_SIZE, stream](t1, c, t2)
                    scale_kernel[blocks, BLOCK_SIZE, stream](t2, s, out)
                else:
                    fused_kernel[blocks, BLOCK_SIZE, stream](a, b, c, s, out)

            recorded: list[graphs.CudaGraph] = []

            def run() -> None:  # recorded on the first call, inside the sweep's check, so a failure is reported
                if not recorded:
                    recorded.append(graphs.capture(pipeline))
                recorded[0].replay(default)

            poison = (lambda: poison_on_device(t1, t2, out)) if three else (lambda: poison_on_device(out))
            return Case(run, lambda: out, poison, pool.expected[:n])

        return case

    return factory


def _numba_best(pool: Pool) -> Callable[[int], Case]:
    # Look the best variant up once, so that the lookup is not timed.  The pool's views
    # start at the allocation, so they are aligned for the 16-byte variants.
    name = roofline.best_variant_name()
    launch = roofline.VARIANTS[name]
    print(f"numba fused (best): the {name} variant of helpers.lessons.roofline.roofline", file=sys.stderr)

    def case(n: int) -> Case:
        a, b, c, _, _, out = pool.views(n)
        return Case(lambda: launch(a, b, c, pool.s, out), lambda: out, lambda: poison_on_device(out), pool.expected[:n])

    return case


def _numpy_cpu(pool: Pool) -> Callable[[int], Case]:
    def case(n: int) -> Case:
        a, b, c = (x[:n] for x in pool.host)
        s = pool.s
        last: list[np.ndarray] = []

        def run() -> None:
            last[:] = [(a + b) * c / s]

        return Case(run, lambda: last[0], last.clear, pool.expected[:n], poisoned=False)

    return case


def _require_gpu_module(name: str) -> Any:
    if is_simulator():
        raise Unavailable(f"{name} needs a GPU (this is the simulator)")
    if importlib.util.find_spec(name) is None:
        raise Unavailable(f"{name} is not installed")
    try:
        return importlib.import_module(name)
    except Exception as error:  # a broken install must not stop the sweep
        raise Unavailable(f"{name} failed to import: {error}") from None


def _cupy_elementwise(pool: Pool) -> Callable[[int], Case]:
    cupy = _require_gpu_module("cupy")
    kernel = cupy.ElementwiseKernel("float32 a, float32 b, float32 c, float32 s", "float32 out",
                                    "out = (a + b) * c / s", "abc_fused")
    a_, b_, c_, out_ = (cupy.asarray(x) for x in (pool.a, pool.b, pool.c, pool.out))

    def case(n: int) -> Case:
        a, b, c, out = a_[:n], b_[:n], c_[:n], out_[:n]
        out_numba = pool.out[:n]
        return Case(lambda: kernel(a, b, c, pool.s, out), lambda: out_numba, lambda: poison_on_device(out_numba),
                    pool.expected[:n])

    return case


def _torch_views(torch: Any, pool: Pool) -> list[Any]:
    return [torch.as_tensor(x, device="cuda") for x in (pool.a, pool.b, pool.c, pool.t1, pool.t2, pool.out)]


def _torch_eager(pool: Pool) -> Callable[[int], Case]:
    torch = _require_gpu_module("torch")
    full = _torch_views(torch, pool)

    def case(n: int) -> Case:
        a, b, c, t1, t2, out = (x[:n] for x in full)
        s = float(pool.s)

        def run() -> None:  # three library ops, intermediates in memory: the unfused pipeline
            torch.add(a, b, out=t1)
            torch.mul(t1, c, out=t2)
            torch.div(t2, s, out=out)

        numba_views = pool.views(n)
        return Case(run, lambda: out, lambda: poison_on_device(*numba_views[3:]), pool.expected[:n])

    return case


def _torch_compile(pool: Pool) -> Callable[[int], Case]:
    torch = _require_gpu_module("torch")
    full = _torch_views(torch, pool)

    def expression(a: Any, b: Any, c: Any, s: float) -> Any:
        return (a + b) * c / s

    compiled = torch.compile(expression, dynamic=True)  # one compilation serves every n
    started = time.perf_counter()
    warm = [x[:1000] for x in full[:3]]
    compiled(*warm, float(pool.s))
    torch.cuda.synchronize()
    print(f"torch.compile: compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    def case(n: int) -> Case:
        a, b, c = (x[:n] for x in full[:3])
        s = float(pool.s)
        last: list[Any] = []

        def run() -> None:
            last[:] = [compiled(a, b, c, s)]

        def poison() -> None:
            # The output is a fresh allocation: fill the last one with NaN and hand it back to
            # PyTorch's caching allocator, which gives the same block to the next call.
            if last:
                last.pop().fill_(float("nan"))

        return Case(run, lambda: last[0], poison, pool.expected[:n])

    return case


def _device_copy(pool: Pool) -> Callable[[int], Case]:
    def case(n: int) -> Case:
        a, _, _, _, _, out = pool.views(n)
        copy, _method = library_copy(a, out)  # a copy kernel; cuMemcpyDtoD's copy engines are slower
        return Case(copy, lambda: out, lambda: poison_on_device(out), a)

    return case


IMPLEMENTATIONS: dict[str, Implementation] = {
    impl.key: impl
    for impl in (
        Implementation("three", "numba three kernels", "gpu", "three kernels", "add, multiply, scale: 3 launches", _numba_three),
        Implementation("fused", "numba fused", "gpu", "fused", "one launch, one element per thread", _numba_fused),
        Implementation("three-graph", "numba three kernels + graph", "gpu", "three kernels",
                       "the 3 launches recorded once as a CUDA graph, replayed", _numba_graph(True)),
        Implementation("fused-graph", "numba fused + graph", "gpu", "fused",
                       "the fused launch recorded once as a CUDA graph, replayed", _numba_graph(False)),
        Implementation("best", "numba fused (best)", "gpu", "fused", "the fastest variant of notebook 07 (helpers.lessons.roofline.roofline)", _numba_best),
        Implementation("numpy", "numpy (CPU)", "cpu", "three kernels", "(a + b) * c / s on the host", _numpy_cpu),
        Implementation("cupy", "cupy ElementwiseKernel", "gpu", "fused", "one generated kernel", _cupy_elementwise),
        Implementation("torch", "torch eager", "gpu", "three kernels", "torch.add/mul/div with out=: 3 launches", _torch_eager),
        Implementation("compile", "torch.compile", "gpu", "fused", "Inductor/Triton, dynamic=True", _torch_compile),
        Implementation("copy", "device copy", "gpu", "copy", "device-to-device copy of a (a library copy kernel)", _device_copy),
    )
}


# --- command-line options ----------------------------------------------------------------


@dataclass
class Options:
    sizes: list[int]
    implementations: list[str]
    repeats: int = DEFAULT_REPEATS
    warmup: int = DEFAULT_WARMUP
    out: Path | None = None
    overhead: bool = True
    plots: bool = True
    progress: bool = True


_POWER = re.compile(r"^2\^(\d+)$")
_RANGE = re.compile(r"^2\^(\d+)\.\.2\^(\d+)(?::(\d+))?$")


MAX_EXPONENT = 40  # 2^40 float32 elements are 4 TiB per array: more than any GPU holds


def _check_exponent(token: str, exponent: int) -> None:
    if exponent > MAX_EXPONENT:
        raise ValueError(f"size {token!r}: 2^{exponent} elements is far more than any GPU's memory; "
                         f"use exponents up to {MAX_EXPONENT} (2^28 fills an H200 sweep)")


def parse_sizes(text: str) -> list[int]:
    """``"2^10..2^28"`` (every power), ``"2^10..2^28:2"`` (every other), ``"1000,2^20"``: sorted sizes."""
    sizes: set[int] = set()
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        if match := _RANGE.match(token):
            first, last, step = int(match[1]), int(match[2]), int(match[3] or 1)
            if first > last or step < 1:
                raise ValueError(f"size range {token!r}: write 2^LOW..2^HIGH[:STEP] with LOW <= HIGH and STEP >= 1")
            _check_exponent(token, last)
            sizes.update(2**k for k in range(first, last + 1, step))
        elif match := _POWER.match(token):
            _check_exponent(token, int(match[1]))
            sizes.add(2 ** int(match[1]))
        elif token.isdigit():
            sizes.add(int(token))
        else:
            raise ValueError(f"cannot read size {token!r}: use a number (1000), a power (2^20) or a range (2^10..2^28)")
    if not sizes:
        raise ValueError("no sizes given")
    if 0 in sizes:
        raise ValueError("sizes must be positive (n = 0 launches nothing)")
    return sorted(sizes)


def parse_implementations(text: str) -> list[str]:
    keys = list(IMPLEMENTATIONS) if text.strip() == "all" else [t.strip() for t in text.split(",") if t.strip()]
    unknown = [k for k in keys if k not in IMPLEMENTATIONS]
    if unknown or not keys:
        raise ValueError(f"unknown implementation(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(IMPLEMENTATIONS)} or 'all'")
    return list(dict.fromkeys(keys))


def check_options(options: Options) -> Options:
    """Raise ValueError naming the problem; return the options unchanged when they are usable."""
    if options.repeats < 1 or options.warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    if not options.sizes or min(options.sizes) < 1:
        raise ValueError("sizes must be positive")
    if is_simulator() and max(options.sizes) > SIMULATOR_MAX_SIZE:
        raise ValueError(
            f"size {max(options.sizes)} is too large for the CUDA simulator (it runs a few thousand GPU threads "
            f"per second); use sizes up to {SIMULATOR_MAX_SIZE}, e.g. --sizes 100,300"
        )
    if options.out is not None:
        check_output_folder(Path(options.out))
    _check_memory(max(options.sizes))  # on a GPU: before anything is allocated
    return options


def check_output_folder(folder: Path) -> None:
    """Raise ValueError unless ``folder`` is, or can be made, a writable folder."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == folder else f"is inside {existing}, which is a file"
        raise ValueError(f"--out {folder} {what}, not a folder: give a folder for the JSON and PNG files")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {folder}: cannot write in {existing} (permission denied)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.lessons.sweep.bench",
        description="Sweep out = (a + b) * c / s over sizes: Numba three kernels and fused kernel against their peers.",
    )
    parser.add_argument("--sizes", default=None,
                        help="sizes: 2^10..2^28 (every power; the GPU default), 2^10..2^28:2 (every other), "
                        "or a list such as 1000,2^20 (simulator default: 100,300)")
    parser.add_argument("--impl", default="all", help=f"comma-separated, from: {', '.join(IMPLEMENTATIONS)}; or 'all'")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed repeats per size and mode (>= 20 for the record)")
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="untimed calls before timing")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/h200 on an H200, results/simulator in the simulator)")
    parser.add_argument("--no-overhead", action="store_true", help="skip the launch-overhead measurement")
    parser.add_argument("--no-plots", action="store_true", help="write JSON only")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def parse_options(argv: Sequence[str] | None = None) -> Options:
    """Read the command line; a bad option exits with a message naming it (argparse's usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        sizes = parse_sizes(args.sizes) if args.sizes else list(SIMULATOR_SIZES if is_simulator() else GPU_SIZES)
        options = Options(sizes=sizes, implementations=parse_implementations(args.impl), repeats=args.repeats,
                          warmup=args.warmup, out=args.out, overhead=not args.no_overhead, plots=not args.no_plots,
                          progress=not args.quiet)
        return check_options(options)
    except ValueError as error:
        parser.error(str(error))
        raise  # unreachable: parser.error exits


# --- counting and checking ---------------------------------------------------------------


def count_pipelines(n: int = 1000) -> dict[str, PipelineTraffic]:
    """Trips, bytes and working set per element of both Numba pipelines, counted by the ledger."""
    a, b, c = (cuda.to_device(x) for x in random_inputs(n, dtype=DTYPE))
    t1, t2, out = (cuda.device_array(n, DTYPE) for _ in range(3))
    with Ledger("three kernels") as three:
        run_three_kernels(a, b, c, 2.0, t1, t2, out)
    with Ledger("fused") as fused:
        run_fused(a, b, c, 2.0, out)
    counted = {}
    for ledger in (three, fused):
        arrays = {t.name: t.itemsize * t.size for launch in ledger.launches for t in launch.arrays}
        counted[ledger.name] = PipelineTraffic(
            launches=len(ledger.launches),
            trips=ledger.trips,
            bytes_per_element=ledger.bytes_per_element(),
            working_set_per_element=sum(arrays.values()) / ledger.elements,
            round_trips=list(ledger.round_trips()),
            counted_by=ledger.counted_by(),
        )
    itemsize = np.dtype(DTYPE).itemsize
    counted["copy"] = PipelineTraffic(launches=1, trips=2, bytes_per_element=2 * itemsize,
                                      working_set_per_element=2 * itemsize, round_trips=[],
                                      counted_by="model (read a, write out)")
    return counted


def verify(case: Case, label: str, n: int) -> Verification:
    """Run once, poison the output, run again, and compare with NumPy's answer on the device.

    Raises :class:`CheckFailed` with the first bad element when the result is wrong.
    """
    case.run()
    cuda.synchronize()
    case.poison()
    cuda.synchronize()
    case.run()
    cuda.synchronize()
    got = case.output()
    if isinstance(got, np.ndarray):
        got_device = cuda.to_device(got)
    elif hasattr(got, "copy_to_host"):  # a Numba device array
        got_device = got
    else:  # a CuPy array or a PyTorch tensor, viewed through __cuda_array_interface__
        got_device = cuda.as_cuda_array(got)
    check_on_device(got_device, case.expected, name=f"{label} at n={n}", rtol=default_tolerance(DTYPE))
    return Verification(implementation=label, n=n, passed=True, poisoned=case.poisoned)


# --- timing ------------------------------------------------------------------------------------


class GpuClock:
    """CUDA-event timing in the three modes, sharing one L2 flush buffer and one hold kernel."""

    def __init__(self, l2_bytes: int) -> None:
        self.flush_buffer = cuda.to_device(np.zeros(FLUSH_FACTOR * l2_bytes // 4, dtype=np.float32))
        self.sink = cuda.device_array(1, np.float32)
        self.flush_blocks = 4 * (sm_count() or 1)
        self.flush()
        cuda.synchronize()

    def flush(self) -> None:
        _read_all[self.flush_blocks, BLOCK_SIZE](self.flush_buffer, self.sink)

    def queued(self, run: Callable[[], Any], repeats: int, *, cold: bool) -> tuple[list[float], float]:
        """GPU-only times: the launches are queued behind a wait kernel long enough to hide their issue cost."""
        hold_us = max(MIN_HOLD_US, 5 * host_enqueue_us(run))
        return event_samples(run, repeats, hold_us=hold_us, before=self.flush if cold else None), hold_us


def time_host(run: Callable[[], Any], repeats: int, budget_s: float = CPU_BUDGET_S) -> list[float]:
    """Wall-clock times (ms) of a host computation; fewer repeats when one call is slow."""
    started = time.perf_counter()
    run()  # warm-up, and a measure of how many repeats fit in the budget
    first = time.perf_counter() - started
    count = max(MIN_CPU_REPEATS, min(repeats, int(budget_s / max(first, 1e-9))))
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1e3)
    return samples


def _measurement(label: str, n: int, mode: str, samples: list[float], hold_us: float | None = None) -> Measurement:
    timing = Timing(label, samples)
    return Measurement(implementation=label, n=n, mode=mode, median_ms=timing.median_ms, iqr_ms=timing.spread_ms,
                       samples_ms=[float(f"{x:.6g}") for x in samples], hold_us=hold_us)


def _check_memory(n_max: int) -> None:
    if is_simulator():
        return
    free, _ = cuda.current_context().get_memory_info()
    needed = 10 * n_max * np.dtype(DTYPE).itemsize + FLUSH_FACTOR * (l2_bytes() or 0)
    if needed > free:
        raise ValueError(f"n = {n_max} needs about {needed / 2**30:.1f} GiB of GPU memory, "
                         f"{free / 2**30:.1f} GiB is free: choose smaller --sizes")


# --- the sweep -----------------------------------------------------------------------------------


def _progress(total: int, enabled: bool) -> Any:
    return tqdm(total=total, desc="sweep", unit="case", file=sys.stderr, disable=not enabled)


def set_up(pool: Pool, keys: Sequence[str], counted: dict[str, PipelineTraffic],
           infos: dict[str, ImplementationInfo], *, verbose: bool = True) -> dict[str, Callable[[int], Case]]:
    """Prepare each implementation (imports, compilation); record in ``infos`` which ran and why not."""
    builders: dict[str, Callable[[int], Case]] = {}
    for key in keys:
        impl = IMPLEMENTATIONS[key]
        traffic = counted[impl.traffic]
        info = ImplementationInfo(key=key, device=impl.device, traffic=impl.traffic, note=impl.note,
                                  bytes_per_element=traffic.bytes_per_element,
                                  working_set_per_element=traffic.working_set_per_element)
        setup_started = time.perf_counter()
        try:
            builders[impl.label] = impl.factory(pool)
        except Unavailable as why:
            info.status, info.reason = "skipped", str(why)
            if verbose:
                print(f"skipping {impl.label}: {why}", file=sys.stderr)
        except Exception as error:  # a peer that cannot be set up is reported, not fatal
            info.status, info.reason = "skipped", f"setup failed: {type(error).__name__}: {error}"
            print(f"skipping {impl.label}: setup failed: {error}", file=sys.stderr)
        info.setup_s = round(time.perf_counter() - setup_started, 3)
        infos[impl.label] = info
    return builders


def check_implementations(n: int = 1000, keys: Sequence[str] | None = None) -> dict[str, str]:
    """Check each implementation once at size n, without timing: label -> "correct", "skipped: ..." or the error."""
    keys = list(keys or IMPLEMENTATIONS)
    pool = Pool(n)
    infos: dict[str, ImplementationInfo] = {}
    builders = set_up(pool, keys, count_pipelines(), infos, verbose=False)
    pool.load_expected(n)
    report = {}
    for label, info in infos.items():
        if label not in builders:
            report[label] = f"skipped: {info.reason}"
            continue
        try:
            row = verify(builders[label](n), label, n)
            report[label] = "correct" + (", output poisoned first" if row.poisoned else ", fresh output array")
        except CheckFailed as error:
            report[label] = f"WRONG: {error}"
    return report


def run_sweep(
    sizes: Sequence[int] | None = None,
    implementations: Sequence[str] | None = None,
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    progress: bool = True,
    checkpoint: Callable[[Sweep], Any] | None = None,
) -> Sweep:
    """Check and time every implementation at every size; return the sweep's record.

    ``checkpoint(sweep)`` is called after each size, so that a run cut short still
    leaves its measurements behind.  An implementation that gives a wrong answer is
    recorded as failed and never timed.
    """
    options = check_options(Options(
        sizes=sorted(set(sizes or (SIMULATOR_SIZES if is_simulator() else GPU_SIZES))),
        implementations=list(implementations or IMPLEMENTATIONS), repeats=repeats, warmup=warmup))
    simulated = is_simulator()
    started = time.perf_counter()
    n_max = max(options.sizes)
    _check_memory(n_max)
    cache = l2_bytes()
    pool = Pool(n_max)
    sweep = Sweep(
        benchmark="out = (a + b) * c / s, size sweep",
        simulated=simulated,
        note=("SIMULATED: the CUDA simulator checked correctness only; no times were measured"
              if simulated else "CUDA events; every sample kept; medians and interquartile ranges"),
        complete=False,
        settings=SweepSettings(
            sizes=options.sizes, repeats=options.repeats, warmup=options.warmup, dtype="float32",
            block_size=BLOCK_SIZE, l2_bytes=cache, modes={} if simulated else dict(sa.MODES),
            cache_policy=("L2 labelled, not hidden: 'gpu' reuses the buffers (a working set smaller than the L2 "
                          "stays cached between repeats), 'gpu_cold' reads a buffer of "
                          f"{FLUSH_FACTOR}x the L2 before each repeat so data come from DRAM"),
            verification="every implementation at every size and at n_max - 3, on fresh random inputs in [0.5, 2), "
                         "output poisoned with NaN first, compared with NumPy on the device (rtol 1e-5)",
            s=float(pool.s),
        ),
        pipelines=count_pipelines(),
    )
    builders = set_up(pool, options.implementations, sweep.pipelines, sweep.implementations)

    def checked(label: str, case: Case, n: int) -> bool:
        """Verify; a wrong implementation is recorded, dropped from the sweep, and never timed."""
        try:
            sweep.verification.append(verify(case, label, n))
            return True
        except Exception as error:  # a wrong answer (CheckFailed), or a peer that breaks at a new size
            reason = str(error) if isinstance(error, CheckFailed) else f"{type(error).__name__}: {error}"
            sweep.verification.append(Verification(implementation=label, n=n, passed=False, error=reason))
            info = sweep.implementations[label]
            info.status, info.reason = "failed", reason
            del builders[label]
            print(f"{label} gives a wrong result at n={n}; it will not be timed: {reason}", file=sys.stderr)
            return False

    odd = n_max - 3 if n_max > 3 else n_max  # not a multiple of the block size: exercises the bounds guard
    pool.load_expected(odd)
    for label, build in list(builders.items()):
        checked(label, build(odd), odd)

    clock = None if simulated else GpuClock(cache or 0)
    bar = _progress(len(options.sizes) * len(builders), options.progress)
    try:
        for n in options.sizes:
            pool.load_expected(n)
            for label, build in list(builders.items()):
                bar.set_postfix_str(f"n={sa.power_label(n)} {label}")
                case = build(n)
                if checked(label, case, n) and clock is not None:
                    sweep.measurements.extend(_time_case(case, label, n, options, clock,
                                                         cpu=sweep.implementations[label].device == "cpu"))
                bar.update(1)
            if checkpoint is not None:
                checkpoint(sweep)
    finally:
        bar.close()
    if not simulated:
        _release_peer_memory()
        sweep.regimes = {label: {mode: _regimes_by_size(sweep, label, mode) for mode in ("loop", "gpu")}
                         for label in builders if sweep.implementations[label].device == "gpu"}
    sweep.claims = check_claims(sweep)
    sweep.complete = True
    sweep.elapsed_s = round(time.perf_counter() - started, 1)
    return sweep


def _regimes_by_size(sweep: Sweep, label: str, mode: str) -> dict[int, str]:
    try:
        return dict(zip((int(n) for n in sa.series(sweep, label, mode)[0]), sa.regimes_of(sweep, label, mode)))
    except ValueError as error:  # e.g. a curve with a zero time: say so rather than lose the sweep
        print(f"no regimes for {label} ({mode}): {error}", file=sys.stderr)
        return {}


def _time_case(case: Case, label: str, n: int, options: Options, clock: GpuClock, *, cpu: bool) -> list[Measurement]:
    if cpu:
        return [_measurement(label, n, "cpu", time_host(case.run, options.repeats))]
    loop = time_gpu(case.run, label=label, repeats=options.repeats, warmup=options.warmup, hide_launch=False)
    assert loop is not None  # only called on a GPU
    rows = [_measurement(label, n, "loop", loop.samples_ms)]
    for mode, cold in (("gpu", False), ("gpu_cold", True)):
        samples, hold_us = clock.queued(case.run, options.repeats, cold=cold)
        rows.append(_measurement(label, n, mode, samples, hold_us=round(hold_us, 1)))
    return rows


def _release_peer_memory() -> None:
    for name, release in (("torch", lambda m: m.cuda.empty_cache()),
                          ("cupy", lambda m: m.get_default_memory_pool().free_all_blocks())):
        if name in sys.modules:
            release(sys.modules[name])


# --- what the sweep checks about this GPU (a benchmark, not a timed test) -----------------------


def check_claims(sweep: Sweep, mode: str = "loop") -> list[Claim]:
    """Statements about the GPU at n = 2^28, each marked true, false or not measured."""
    n = EARLIER_H200["n"]
    device = sweep.provenance.device if sweep.provenance else ("simulator" if sweep.simulated else device_name())
    comparable = EARLIER_H200["device"] in str(device)

    def median(label: str) -> float | None:
        return sa.median_at(sweep, label, n, mode) if label in sweep.implementations else None

    claims: list[Claim] = []
    three, fused = median("numba three kernels"), median("numba fused")
    ratio = sweep.pipelines["three kernels"].bytes_per_element / sweep.pipelines["fused"].bytes_per_element
    speed = three / fused if three and fused else None
    least = EARLIER_H200["min_speedup"]
    claims.append(Claim(f"fused is >= {least:g}x faster than three kernels at 2^28 (the bytes ratio is {ratio:g})",
                        speed, f">= {least:g}", None if speed is None else speed >= least,
                        "" if speed is None else f"{speed:.2f}x"))
    tolerance = EARLIER_H200["tolerance"]
    for label, earlier_ms in EARLIER_H200["times_ms"].items():
        got = median(label)
        text = f"{label} at 2^28 is within {tolerance:.0%} of the earlier H200 probe's {earlier_ms} ms"
        if got is not None and not comparable:
            claims.append(Claim(text, got, f"{earlier_ms} ms", None, f"measured on {device}, not an H200"))
            continue
        diff = None if got is None else got / earlier_ms - 1
        claims.append(Claim(text, got, f"{earlier_ms} ms +/- {tolerance:.0%}",
                            None if diff is None else abs(diff) <= tolerance,
                            "" if diff is None else f"{format_ms(got)}, {diff:+.1%}"))
    copy_ms = median("device copy")
    copy_gbs = None if copy_ms is None else float(sa.bytes_moved(sweep, "device copy", n)) / (copy_ms * 1e-3) / 1e9
    earlier_gbs = EARLIER_H200["copy_gbs"]
    text = f"the device copy at 2^28 is within {tolerance:.0%} of the earlier probe's {earlier_gbs:g} GB/s"
    claims.append(Claim(text, copy_gbs, f"{earlier_gbs:g} GB/s +/- {tolerance:.0%}",
                        None if copy_gbs is None or not comparable else abs(copy_gbs / earlier_gbs - 1) <= tolerance,
                        "" if copy_gbs is None else f"{copy_gbs:,.0f} GB/s, {copy_gbs / earlier_gbs - 1:+.1%}"))
    return claims


# --- launch overhead -----------------------------------------------------------------------------


def _explicit(kernel: Any, signature: str) -> Any:
    """The same Python kernel compiled eagerly for one signature (no type dispatch at launch)."""
    return cuda.jit(signature)(getattr(kernel, "py_func", None) or kernel.fn)


def measure_launch_overhead(n: int = 1024, launches: int = 300, repeats: int = 9) -> LaunchOverhead:
    """Host cost of one launch: Numba lazy against explicit signature, CuPy, one PyTorch op.

    For each launcher: ``issue_us`` is the host time per launch over a burst of
    ``launches`` back-to-back launches (the GPU keeps up, so this is the Python and
    driver cost); ``with_sync_us`` includes waiting for the burst to finish;
    ``launch_and_wait_us`` is one launch followed by ``cuda.synchronize()``.
    """
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return LaunchOverhead(simulated=True, note="SIMULATED: launch overhead is not measured in the simulator")
    a, b, c = (cuda.to_device(x) for x in random_inputs(n, dtype=DTYPE))
    out = cuda.device_array(n, DTYPE)
    s, blocks = DTYPE(2.0), blocks_for(n)
    add_sig = _explicit(add_kernel, "void(float32[::1], float32[::1], float32[::1])")
    fused_sig = _explicit(fused_kernel, "void(float32[::1], float32[::1], float32[::1], float32, float32[::1])")
    launchers: dict[str, Callable[[], Any]] = {
        "numba add, lazy @cuda.jit": lambda: add_kernel[blocks, BLOCK_SIZE](a, b, out),
        "numba add, explicit signature": lambda: add_sig[blocks, BLOCK_SIZE](a, b, out),
        "numba fused, lazy @cuda.jit": lambda: fused_kernel[blocks, BLOCK_SIZE](a, b, c, s, out),
        "numba fused, explicit signature": lambda: fused_sig[blocks, BLOCK_SIZE](a, b, c, s, out),
    }
    skipped: dict[str, str] = {}
    try:
        cupy = _require_gpu_module("cupy")
        kernel = cupy.ElementwiseKernel("float32 a, float32 b", "float32 out", "out = a + b", "abc_add")
        ca, cb, cout = (cupy.asarray(x) for x in (a, b, out))
        launchers["cupy ElementwiseKernel (add)"] = lambda: kernel(ca, cb, cout)
    except Unavailable as why:
        skipped["cupy"] = str(why)
    try:
        torch = _require_gpu_module("torch")
        ta, tb, tout = (torch.as_tensor(x, device="cuda") for x in (a, b, out))
        launchers["torch.add(out=)"] = lambda: torch.add(ta, tb, out=tout)
    except Unavailable as why:
        skipped["torch"] = str(why)
    rows: dict[str, LauncherCost] = {}
    for label, launch in launchers.items():
        for _ in range(20):
            launch()
        cuda.synchronize()
        issue, with_sync = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(launches):
                launch()
            t1 = time.perf_counter()
            cuda.synchronize()
            t2 = time.perf_counter()
            issue.append((t1 - t0) / launches * 1e6)
            with_sync.append((t2 - t0) / launches * 1e6)
        single = []
        for _ in range(100):
            t0 = time.perf_counter()
            launch()
            cuda.synchronize()
            single.append((time.perf_counter() - t0) * 1e6)
        rows[label] = LauncherCost(issue_us=statistics.median(issue), with_sync_us=statistics.median(with_sync),
                                   launch_and_wait_us=statistics.median(single), issue_samples_us=issue,
                                   launch_and_wait_samples_us=single)
    return LaunchOverhead(simulated=False, n=n, launches_per_burst=launches, repeats=repeats,
                          note="host wall clock (time.perf_counter) per launch on a tiny array", launchers=rows,
                          skipped=skipped)


# --- reporting ---------------------------------------------------------------------------------


def summary_table(sweep: Sweep, sizes: Sequence[int] = (2**20, 2**24, 2**28), mode: str = "loop") -> str:
    """Median times at a few sizes for every implementation that ran."""
    if not sa.has_timings(sweep):
        return "no timings: " + sweep.note
    labels = [label for label, info in sweep.implementations.items() if info.status == "ok"]
    header = ["implementation"] + [sa.power_label(n) for n in sizes]
    rows = [header]
    for label in labels:
        rows.append([label] + [("-" if (t := sa.median_at(sweep, label, n, mode)) is None else format_ms(t)) for n in sizes])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths))) for r in rows)


def overhead_table(overhead: LaunchOverhead) -> str:
    """Host time per launch: issue cost in a burst, and one launch followed by a wait."""
    if not overhead.launchers:
        return overhead.note
    width = max(len(k) for k in overhead.launchers)
    lines = [f"{'launcher'.ljust(width)}  issue/launch  launch+wait"]
    for label, row in overhead.launchers.items():
        lines.append(f"{label.ljust(width)}  {row.issue_us:9.1f} µs  {row.launch_and_wait_us:8.1f} µs")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m helpers.lessons.sweep.bench``: sweep, write the records and plots, print what was checked."""
    options = parse_options(argv)
    if is_simulator():
        print("backend: simulator -- a tiny sweep that checks correctness; no times are measured or reported")

    def keep(sweep: Sweep) -> Path:
        return save(sweep, folder=options.out)

    sweep = run_sweep(options.sizes, options.implementations, repeats=options.repeats, warmup=options.warmup,
                      progress=options.progress, checkpoint=keep)
    path = keep(sweep)
    print(f"wrote {path}")
    overhead = None
    if options.overhead:
        overhead = measure_launch_overhead()
        print(f"wrote {save(overhead, folder=path.parent)}")
    if options.plots:
        for png in sweep_plots.save_all(sweep, path.parent, overhead=overhead):
            print(f"wrote {png}")
    print(summary_table(sweep))
    if overhead is not None:
        print(overhead_table(overhead))
    for claim in sweep.claims:
        print(claim.line())
    failed = [v for v in sweep.verification if not v.passed]
    for row in failed:
        print(f"WRONG RESULT, not timed: {row.error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
