"""The size sweep: ``out = (a + b) * c / s`` from n = 2^10 to 2^28, Numba against its peers.

At every size every implementation is checked against NumPy before it is timed with CUDA events
in three modes (:data:`helpers.lessons.sweep.analysis.MODES`: ``loop``, ``gpu``, ``gpu_cold``); every
sample goes to ``bench_sweep.json``, then the host cost of one launch (:mod:`.overhead`), then plots.
In the simulator a tiny sweep checks correctness only and reports no times.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from helpers.backend import is_simulator
from helpers.device import device_name, l2_bytes
from helpers.harness import peers
from helpers.harness.campaign import DTYPE, Case, Checked, Pool, add_options, check_sizes, default_sizes, run_cases, whole
from helpers.harness.cli import Command
from helpers.ledger import Ledger
from helpers.lessons.launches import graphs
from helpers.lessons.roofline.kernels import VARIANTS, best_variant_name
from helpers.results import Claim, save
from helpers.sizes import BLOCK_SIZE
from helpers.timing import FLUSH_FACTOR, MIN_HOLD_US, Timing, event_samples, format_ms, host_enqueue_us, l2_flush, time_gpu

from . import analysis as sa
from .overhead import measure_launch_overhead
from .record import ImplementationInfo, Measurement, PipelineTraffic, Sweep, SweepSettings, Verification
from .report import overhead_table, save_all, summary_table

DEFAULT_REPEATS = 25
DEFAULT_WARMUP = 3
CPU_BUDGET_S = 1.0  # NumPy at large n: as many repeats as fit in this, at least MIN_CPU_REPEATS
MIN_CPU_REPEATS = 3

# Figures an earlier probe of this project measured on an H200 at n = 2^28 (design/series.md,
# "Facts measured"): a sweep on an H200 is expected to reproduce each within 10 %.
EARLIER_H200 = {"device": "NVIDIA H200", "n": 2**28, "copy_gbs": 4277.0, "tolerance": 0.10, "min_speedup": 2.0,
                "times_ms": {"numba three kernels": 2.72, "numba fused": 1.165, "torch.compile": 1.03,
                             "cupy ElementwiseKernel": 1.29, "torch eager": 1.99}}


@dataclass(frozen=True)
class Implementation:
    key: str  # the name on the command line
    label: str  # the name in results and plots
    device: str  # "gpu" or "cpu"
    traffic: str  # the counted pipeline whose memory traffic it shares: "three kernels", "fused" or "copy"
    note: str
    factory: peers.Factory


def _graph(three: bool) -> peers.Factory:
    """The Numba pipeline recorded once per size as a CUDA graph, replayed where the events are (the default stream)."""
    return lambda pool: peers.numba_graph(pool, graphs.capture, three=three,
                                          replay_on=None if is_simulator() else graphs.legacy_stream())


def _best(pool: Pool) -> peers.Builder:
    name = best_variant_name()  # looked up once, so that the lookup is not timed
    return peers.numba_fused(pool, VARIANTS[name])  # the pool's views start at the allocation: 16-byte aligned


IMPLEMENTATIONS: dict[str, Implementation] = {
    impl.key: impl
    for impl in (
        Implementation("three", "numba three kernels", "gpu", "three kernels", "add, multiply, scale: 3 launches",
                       peers.numba_three),
        Implementation("fused", "numba fused", "gpu", "fused", "one launch, one element per thread", peers.numba_fused),
        Implementation("three-graph", "numba three kernels + graph", "gpu", "three kernels",
                       "the 3 launches recorded once as a CUDA graph, replayed", _graph(True)),
        Implementation("fused-graph", "numba fused + graph", "gpu", "fused",
                       "the fused launch recorded once as a CUDA graph, replayed", _graph(False)),
        Implementation("best", "numba fused (best)", "gpu", "fused",
                       "the fastest variant of notebook 07 (helpers.lessons.roofline.kernels)", _best),
        Implementation("numpy", "numpy (CPU)", "cpu", "three kernels", "(a + b) * c / s on the host", peers.numpy_host),
        Implementation("cupy", "cupy ElementwiseKernel", "gpu", "fused", "one generated kernel", peers.cupy_elementwise),
        Implementation("torch", "torch eager", "gpu", "three kernels", "torch.add/mul/div with out=: 3 launches",
                       peers.torch_eager),
        Implementation("compile", "torch.compile", "gpu", "fused", f"Inductor/Triton: {peers.describe_torch_compile()}",
                       peers.torch_compiled),
        Implementation("copy", "device copy", "gpu", "copy", "device-to-device copy of a (a library copy kernel)",
                       peers.device_copy),
    )
}


def count_pipelines() -> dict[str, PipelineTraffic]:
    """Trips, bytes and working set per element of both Numba pipelines (counted by the ledger), and the copy's."""
    counted = {name: _traffic(ledger) for name, ledger in peers.count_pipelines().items()}
    itemsize = np.dtype(DTYPE).itemsize
    counted["copy"] = PipelineTraffic(launches=1, trips=2, bytes_per_element=2 * itemsize,
                                      working_set_per_element=2 * itemsize, round_trips=[],
                                      counted_by="model (read a, write out)")
    return counted


def _traffic(ledger: Ledger) -> PipelineTraffic:
    arrays = {t.name: t.itemsize * t.size for launch in ledger.launches for t in launch.arrays}
    return PipelineTraffic(launches=len(ledger.launches), trips=ledger.trips,
                           bytes_per_element=ledger.bytes_per_element(),
                           working_set_per_element=sum(arrays.values()) / ledger.elements,
                           round_trips=list(ledger.round_trips()), counted_by=ledger.counted_by())


def set_up(pool: Pool, keys: Sequence[str], counted: dict[str, PipelineTraffic],
           infos: dict[str, ImplementationInfo], *, verbose: bool = True) -> dict[str, peers.Builder]:
    """Prepare each implementation (imports, compilation); record in ``infos`` which ran and why not."""
    prepared = peers.prepare({IMPLEMENTATIONS[k].label: IMPLEMENTATIONS[k].factory for k in keys}, pool, say=verbose)
    for key in keys:
        impl = IMPLEMENTATIONS[key]
        traffic = counted[impl.traffic]
        infos[impl.label] = ImplementationInfo(
            key=key, device=impl.device, traffic=impl.traffic, note=impl.note,
            bytes_per_element=traffic.bytes_per_element, working_set_per_element=traffic.working_set_per_element,
            status="skipped" if impl.label in prepared.absent else "ok", reason=prepared.absent.get(impl.label),
            setup_s=prepared.seconds[impl.label])
    return prepared.builders


def check_implementations(n: int = 1000, keys: Sequence[str] | None = None) -> dict[str, str]:
    """Check each implementation once at size n, without timing: label -> "correct", "skipped: ..." or the error."""
    pool = Pool(n)
    infos: dict[str, ImplementationInfo] = {}
    builders = set_up(pool, list(keys or IMPLEMENTATIONS), count_pipelines(), infos, verbose=False)
    report = {label: f"skipped: {info.reason}" for label, info in infos.items() if label not in builders}

    def checked(check: Checked) -> None:
        report[check.label] = (("correct, output poisoned first" if check.poisoned else "correct, fresh output array")
                               if check.passed else f"WRONG: {check.error}")

    run_cases(builders, [n], pool=pool, report=checked, progress=False)
    return {label: report[label] for label in infos}


class GpuClock:
    """CUDA-event timing in the three modes, sharing one L2 flush buffer and one hold kernel."""

    def __init__(self, repeats: int, warmup: int) -> None:
        self.repeats, self.warmup = repeats, warmup
        self.flush = l2_flush()

    def queued(self, run: Callable[[], Any], *, cold: bool) -> tuple[list[float], float]:
        """GPU-only times: the launches are queued behind a wait kernel long enough to hide their issue cost."""
        hold_us = max(MIN_HOLD_US, 5 * host_enqueue_us(run))
        return event_samples(run, self.repeats, hold_us=hold_us, before=self.flush if cold else None), hold_us

    def measure(self, case: Case, label: str, n: int, *, cpu: bool) -> list[Measurement]:
        """Every mode of one checked case: ``cpu`` on the host; ``loop``, ``gpu`` and ``gpu_cold`` on the GPU."""
        if cpu:
            return [_measurement(label, n, "cpu", time_host(case.run, self.repeats))]
        loop = time_gpu(case.run, label=label, repeats=self.repeats, warmup=self.warmup, hide_launch=False)
        assert loop is not None  # only called on a GPU
        rows = [_measurement(label, n, "loop", loop.samples_ms)]
        for mode, cold in (("gpu", False), ("gpu_cold", True)):
            samples, hold_us = self.queued(case.run, cold=cold)
            rows.append(_measurement(label, n, mode, samples, hold_us=round(hold_us, 1)))
        return rows


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


def check_run(sizes: Sequence[int], repeats: int, warmup: int) -> None:
    """Raise ``ValueError`` naming the problem: counts out of range, or sizes this backend cannot hold."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    check_sizes(sizes, bytes_per_element=10 * np.dtype(DTYPE).itemsize, extra_bytes=FLUSH_FACTOR * (l2_bytes() or 0))


def _new_sweep(sizes: list[int], repeats: int, warmup: int, s: float) -> Sweep:
    simulated = is_simulator()
    return Sweep(
        benchmark="out = (a + b) * c / s, size sweep",
        simulated=simulated,
        note=("SIMULATED: the CUDA simulator checked correctness only; no times were measured"
              if simulated else "CUDA events; every sample kept; medians and interquartile ranges"),
        complete=False,
        settings=SweepSettings(
            sizes=sizes, repeats=repeats, warmup=warmup, dtype="float32",
            block_size=BLOCK_SIZE, l2_bytes=l2_bytes(), modes={} if simulated else dict(sa.MODES),
            cache_policy=("L2 labelled, not hidden: 'gpu' reuses the buffers (a working set smaller than the L2 "
                          "stays cached between repeats), 'gpu_cold' reads a buffer of "
                          f"{FLUSH_FACTOR}x the L2 before each repeat so data come from DRAM"),
            verification="every implementation at every size and at n_max - 3, on fresh random inputs in [0.5, 2), "
                         "output poisoned with NaN first, compared with NumPy on the device (rtol 1e-5)",
            s=s,
        ),
        pipelines=count_pipelines(),
    )


def run_sweep(sizes: Sequence[int] | None = None, implementations: Sequence[str] | None = None, *,
              repeats: int = DEFAULT_REPEATS, warmup: int = DEFAULT_WARMUP, progress: bool = True,
              checkpoint: Callable[[Sweep], Any] | None = None) -> Sweep:
    """Check and time every implementation at every size (one that is wrong is recorded as failed, never timed);
    ``checkpoint(sweep)`` after each size, so a run cut short keeps its measurements."""
    sizes = sorted(set(sizes or default_sizes()))
    check_run(sizes, repeats, warmup)
    started = time.perf_counter()
    pool = Pool(max(sizes))
    sweep = _new_sweep(sizes, repeats, warmup, float(pool.s))
    builders = set_up(pool, list(implementations or IMPLEMENTATIONS), sweep.pipelines, sweep.implementations)
    clock = None if sweep.simulated else GpuClock(repeats, warmup)

    def report(check: Checked) -> None:
        sweep.verification.append(Verification(check.label, check.n, check.passed, check.poisoned, check.error))
        if not check.passed:
            info = sweep.implementations[check.label]
            info.status, info.reason = "failed", check.error

    def timed(label: str, n: int, case: Case) -> None:
        assert clock is not None
        sweep.measurements.extend(clock.measure(case, label, n, cpu=sweep.implementations[label].device == "cpu"))

    run_cases(builders, sizes, pool=pool, report=report, time=None if clock is None else timed, progress=progress,
              checkpoint=None if checkpoint is None else lambda n: checkpoint(sweep))
    if not sweep.simulated:
        peers.release_memory()
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


def check_claims(sweep: Sweep, mode: str = "loop") -> list[Claim]:
    """Statements about the GPU at n = 2^28, each marked true, false or not measured."""
    n = EARLIER_H200["n"]
    device = sweep.provenance.device if sweep.provenance else ("simulator" if sweep.simulated else device_name())
    comparable = EARLIER_H200["device"] in str(device)

    def median(label: str) -> float | None:
        return sa.median_at(sweep, label, n, mode) if label in sweep.implementations else None

    three, fused = median("numba three kernels"), median("numba fused")
    ratio = sweep.pipelines["three kernels"].bytes_per_element / sweep.pipelines["fused"].bytes_per_element
    speed = three / fused if three and fused else None
    least, tolerance = EARLIER_H200["min_speedup"], EARLIER_H200["tolerance"]
    claims = [Claim(f"fused is >= {least:g}x faster than three kernels at 2^28 (the bytes ratio is {ratio:g})",
                    speed, f">= {least:g}", None if speed is None else speed >= least,
                    "" if speed is None else f"{speed:.2f}x")]
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


def _options(parser: argparse.ArgumentParser) -> None:
    add_options(parser, list(IMPLEMENTATIONS), repeats=DEFAULT_REPEATS)
    parser.add_argument("--warmup", type=whole(0, "warmup"), default=DEFAULT_WARMUP, help="untimed calls before timing")
    parser.add_argument("--no-overhead", action="store_true", help="skip the launch-overhead measurement")
    parser.add_argument("--no-plots", action="store_true", help="write JSON only")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _run(args: argparse.Namespace) -> int:
    """Sweep, write the records and plots, print what was checked; 1 when an implementation was wrong."""
    if is_simulator():
        print("backend: simulator -- a tiny sweep that checks correctness; no times are measured or reported")

    def keep(sweep: Sweep) -> Any:
        return save(sweep, folder=args.out)

    sweep = run_sweep(args.sizes, args.impl, repeats=args.repeats, warmup=args.warmup, progress=not args.quiet,
                      checkpoint=keep)
    path = keep(sweep)
    print(f"wrote {path}")
    overhead = None if args.no_overhead else measure_launch_overhead()
    if overhead is not None:
        print(f"wrote {save(overhead, folder=path.parent)}")
    if not args.no_plots:
        for png in save_all(sweep, path.parent, overhead=overhead):
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


COMMANDS = [Command("", "Sweep out = (a + b) * c / s over sizes: Numba three kernels and fused kernel against their peers.",
                    _run, options=_options, check=lambda args: check_run(args.sizes, args.repeats, args.warmup))]
