"""Launches cost too: where a launch's host time goes, and fusion beside CUDA graphs.

1. Host time per launch against the number of array arguments (0 to 5): a lazily compiled kernel,
   the same compiled for an explicit signature, and a one-launch graph of it replayed.
2. The 2x2 over sizes, {three kernels, fused} x {direct, graph}, beside CuPy, torch eager and
   ``torch.compile`` (also with ``mode="reduce-overhead"``, which replays CUDA graphs itself).

Every variant is checked against NumPy at every size before it is timed; in the simulator only the
direct Numba variants are checked, and nothing is timed.
"""

from __future__ import annotations

import argparse
import copy
import faulthandler
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import random_inputs
from helpers.harness import peers
from helpers.harness.campaign import DTYPE, Case, Checked, Pool, add_options, check_sizes, default_sizes, run_cases
from helpers.harness.cli import Command
from helpers.harness.device_checks import poison_on_device
from helpers.harness.tables import power_label as power
from helpers.lessons.roofline.kernels import VARIANTS, best_variant_name
from helpers.pipeline import launch_fused, launch_three
from helpers.results import Claim, Provenance, ResultError, folder_for, load, package_version, save
from helpers.sizes import BLOCK_SIZE, blocks_for

from . import graphs
from .kernels import ARITY_KERNELS
from .record import (DIRECT_FUSED, DIRECT_THREE, FUSED, GRAPH_BEST, GRAPH_FUSED, GRAPH_THREE, PEERS, RO, RO_STATIC,
                     THREE, ArgumentCost, Check, CompiledPerSize, Counted, LaunchesRun, Settings, Timed, Variant)
from .report import argument_table, fit_per_argument, plot_argument_costs, plot_two_by_two, table

def measure_argument_costs(n: int = 1024, launches: int = 200, repeats: int = 9) -> list[ArgumentCost]:
    """Host µs per launch for 0..5 array arguments: lazy, explicit signature, and a one-launch graph."""
    if is_simulator():
        return []
    arrays = [cuda.to_device(x) for x in random_inputs(n, len(ARITY_KERNELS) - 1, dtype=DTYPE)]
    legacy = graphs.legacy_stream()
    blocks = blocks_for(n)
    costs = []
    for count, lazy in enumerate(ARITY_KERNELS):
        args = arrays[:count]
        explicit = peers.explicit_signature(lazy, "void(" + ", ".join(["float32[::1]"] * count) + ")")
        graph = graphs.capture(lambda stream, k=lazy, a=args: k[blocks, BLOCK_SIZE, stream](*a), name=f"{count} arrays")
        row = []
        for call, stream in ((lambda k=lazy, a=args: k[blocks, BLOCK_SIZE](*a), legacy),
                             (lambda k=explicit, a=args: k[blocks, BLOCK_SIZE](*a), legacy), (graph.replay, graph.stream)):
            for _ in range(20):
                call()
            row.append(graphs.host_us_per_call(call, stream, burst=launches, repeats=repeats))
        graph.close()
        costs.append(ArgumentCost(count, *row))
    return costs


def _graph(**how: Any) -> peers.Factory:
    return lambda pool: peers.numba_graph(pool, graphs.capture, **how)


def _best_graph(pool: Pool) -> peers.Builder:
    """The fastest fused variant of notebook 07 (16-byte loads where it can), recorded as a graph."""
    return peers.numba_graph(pool, graphs.capture, launch=VARIANTS[best_variant_name()])  # it launches on no stream


def variants(dynamic: bool | None = None) -> dict[str, tuple[Variant, peers.Factory]]:
    """Every variant and its factory; torch.compile compiled once for every size unless ``dynamic`` is False."""
    def compiled(mode: str | None, static: bool = False) -> peers.Factory:
        return lambda pool: peers.torch_compiled(pool, mode, static=static, dynamic=dynamic)

    default, ro = (peers.describe_torch_compile(mode, dynamic) for mode in (None, "reduce-overhead"))
    return {
        DIRECT_THREE: (Variant(DIRECT_THREE, THREE, 3, False, note="add, multiply, scale: 3 launches"), peers.numba_three),
        DIRECT_FUSED: (Variant(DIRECT_FUSED, FUSED, 1, False, note="one launch"), peers.numba_fused),
        GRAPH_THREE: (Variant(GRAPH_THREE, THREE, 3, True, note="the 3 launches recorded once, replayed"),
                      _graph(three=True)),
        GRAPH_FUSED: (Variant(GRAPH_FUSED, FUSED, 1, True, note="the fused launch recorded once, replayed"), _graph()),
        GRAPH_BEST: (Variant(GRAPH_BEST, FUSED, 1, True,
                             note="helpers.lessons.roofline.kernels' best fused variant, recorded once, replayed"),
                     _best_graph),
        "cupy ElementwiseKernel": (Variant("cupy ElementwiseKernel", FUSED, 1, False, note="one generated kernel"),
                                   peers.cupy_elementwise),
        "torch eager": (Variant("torch eager", THREE, 3, False, note="torch.add/mul/div with out="), peers.torch_eager),
        "torch.compile": (Variant("torch.compile", FUSED, 1, False, note=f"Inductor/Triton, {default}"), compiled(None)),
        RO: (Variant(RO, FUSED, 1, True, note=f"Inductor/Triton, {ro}: torch records and replays CUDA graphs, "
                                              "copying its inputs into the graph's own buffers first"),
             compiled("reduce-overhead")),
        RO_STATIC: (Variant(RO_STATIC, FUSED, 1, True,
                            note=f"as reduce-overhead ({ro}), with a, b and c marked static "
                                 "(torch._dynamo.mark_static_address): the graph reads them where they are"),
                    compiled("reduce-overhead", static=True)),
    }


FACTORIES = variants()
KEYS = {"three": DIRECT_THREE, "fused": DIRECT_FUSED, "three-graph": GRAPH_THREE, "fused-graph": GRAPH_FUSED,
        "best-graph": GRAPH_BEST, "cupy": "cupy ElementwiseKernel", "torch": "torch eager", "compile": "torch.compile",
        "compile-ro": RO, "compile-ro-static": RO_STATIC}


def count_pipelines() -> dict[str, Counted]:
    """Trips of both pipelines, counted by the ledger on the launches a graph of each records."""
    return {name: Counted(len(ledger.launches), ledger.trips, ledger.bytes_per_element(), ledger.counted_by())
            for name, ledger in peers.count_pipelines(graphs.counted).items()}


def api_facts() -> dict[str, str]:
    """Which cuda.core this is, and where its pieces were found."""
    facts = {"numba-cuda": package_version("numba-cuda"),
             "cuda-core": package_version("cuda-core") or package_version("cuda_core")}
    if not is_simulator():
        facts["cuda.core module"] = graphs.core().__name__
        facts["GraphBuilder"] = f"{graphs.graph_builder_type().__module__}.GraphBuilder"
    return {k: str(v) for k, v in facts.items()}


def check_bitwise(n: int = 1024 + 3) -> dict[str, bool]:
    """Graph replays give bit-for-bit the result of the same launches made directly."""
    if is_simulator():
        return {}
    a, b, c = (cuda.to_device(x) for x in random_inputs(n, dtype=DTYPE))
    t1, t2, direct, replayed = (cuda.device_array(n, DTYPE) for _ in range(4))
    s = DTYPE(3.0)
    found = {}
    for name, make in ((THREE, lambda out: lambda stream: launch_three(a, b, c, s, t1, t2, out, stream)),
                       (FUSED, lambda out: lambda stream: launch_fused(a, b, c, s, out, stream))):
        make(direct)(None)
        cuda.synchronize()
        poison_on_device(replayed)
        cuda.synchronize()
        graph = graphs.capture(make(replayed), warm_up=False)
        graph.run()
        found[f"{name} at n={n}"] = bool(np.array_equal(direct.copy_to_host(), replayed.copy_to_host()))
        graph.close()
    return found


def _rounded(samples: Sequence[float]) -> list[float]:
    return [float(f"{x:.6g}") for x in samples]


def _measure(record: LaunchesRun, pool: Pool, group: list[str], stage: Callable[[str], None],
             dynamic: bool | None) -> None:
    """Set up ``group``, then check it at an awkward size, and check and time it at every size."""
    made = variants(dynamic)
    prepared = peers.prepare({label: made[label][1] for label in group}, pool)
    for label in group:
        variant = Variant(**vars(made[label][0]))
        if label in prepared.absent:
            variant.status, variant.reason = "absent", prepared.absent[label]
        record.variants.append(variant)
    stage(f"{', '.join(group)}: set up")
    settings = record.settings

    def report(check: Checked) -> None:
        record.checks.append(Check(check.label, check.n, check.passed, check.poisoned, check.error))
        if not check.passed:
            variant = next(v for v in record.variants if v.label == check.label)
            variant.status, variant.reason = "failed", check.error

    def timed(label: str, n: int, case: Case) -> None:
        burst = settings.burst_small if n <= 2**22 else settings.burst_large
        t = graphs.time_calls(case.run, case.stream or graphs.legacy_stream(), label=label, repeats=settings.repeats,
                              burst=burst)
        assert t is not None
        record.timings.append(Timed(label, n, _rounded(t.host_us), _rounded(t.loop_ms), _rounded(t.gpu_ms), burst,
                                    round(t.hold_us, 1)))

    run_cases(prepared.builders, settings.sizes, pool=pool, report=report, time=None if record.simulated else timed,
              checkpoint=lambda n: stage(f"n = {power(n)}: done"), progress=False)


def run(sizes: Sequence[int] | None = None, labels: Sequence[str] | None = None, *, repeats: int = 25,
        burst_small: int = 30, burst_large: int = 10, arguments: bool = True, progress: bool = True,
        checkpoint: Callable[[LaunchesRun], object] | None = None, dynamic: bool | None = None) -> LaunchesRun:
    """Measure both parts; every variant checked against NumPy before it is timed.  With ``dynamic=False``
    (torch.compile once per size) the record is a :class:`CompiledPerSize`, a file of its own."""
    sizes = sorted(set(sizes or default_sizes()))
    check_sizes(sizes)
    started = time.perf_counter()
    record = (CompiledPerSize if dynamic is False else LaunchesRun)(
        simulated=is_simulator(),
        note=("SIMULATED: correctness of the direct launches only; graphs need a GPU and no times were measured"
              if is_simulator() else "host wall clock and CUDA events; every sample kept"),
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
    record.argument_costs = measure_argument_costs() if arguments else []
    record.bitwise = check_bitwise()
    stage("launch cost against arguments: done")
    pool = Pool(max(sizes))
    labels = list(labels or FACTORIES)
    slow = [label for label in labels if label.startswith("torch.compile")]  # compiling takes seconds
    _measure(record, pool, [label for label in labels if label not in slow], stage, dynamic)
    if slow:
        # torch.compile may record CUDA graphs of its own: a buffer freed by Numba meanwhile would be
        # a forbidden call during that recording, so Numba's frees wait until the group is done.
        with cuda.defer_cleanup():
            _measure(record, pool, slow, stage, dynamic)
    record.torch_counters = _torch_counters()
    record.claims = claims(record)
    record.complete = True
    record.elapsed_s = round(time.perf_counter() - started, 1)
    return record


def _torch_counters() -> dict[str, int]:
    if "torch" not in sys.modules:
        return {}
    try:
        counters = sys.modules["torch"]._dynamo.utils.counters
        return {f"inductor.{k}": int(v) for k, v in counters["inductor"].items()}
    except Exception:  # only a diagnostic
        return {}


def _versus(record: LaunchesRun, mine: str, peer: str, sizes: list[int]) -> Claim | None:
    """``mine`` is no slower than ``peer`` at every size both were timed at."""
    def med(label: str, n: int) -> float | None:
        return record.median(label, n)

    timed = [n for n in sizes if med(peer, n) is not None and med(mine, n) is not None]
    if not timed:
        return None
    faster = [n for n in timed if med(peer, n) < med(mine, n)]  # type: ignore[operator]
    worst = max(timed, key=lambda n: med(mine, n) / med(peer, n))  # type: ignore[operator]
    ratio = med(mine, worst) / med(peer, worst)  # type: ignore[operator]
    short = mine.removeprefix("numba ")
    note = (f"{peer} is faster at no size; at most {short} takes {ratio:.2f}x its time, at {power(worst)}"
            if not faster else
            f"{peer} is faster at {len(faster)} of {len(timed)} sizes ({', '.join(map(power, faster))}); "
            f"at worst {short} takes {ratio:.2f}x its time, at {power(worst)}")
    return Claim(f"{short} is no slower than {peer} at every n from {power(sizes[0])} to {power(sizes[-1])}",
                 ratio, "<= 1.00x at every n", not faster, note)


def claims(record: LaunchesRun) -> list[Claim]:
    """The statements about this GPU that the notebook makes, each checked against the data."""
    sizes = record.sizes()
    if not sizes:
        return [Claim("graphs and fusion", None, "", None, "nothing timed (simulator)")]
    small, large = sizes[0], sizes[-1]
    med = record.median
    host = med(GRAPH_THREE, 1024, "host")
    out = [Claim("host time per replay of the three-kernel graph <= 8 us at n=1024", host, "<= 8 us",
                 None if host is None else host <= 8.0, "" if host is None else f"{host:.1f} us")]
    fg, cp = med(GRAPH_FUSED, small), med("cupy ElementwiseKernel", small)
    out.append(Claim(f"fused + graph takes no more time than CuPy's one launch at {power(small)}",
                     None if fg is None or cp is None else fg / cp, "<= 1",
                     None if fg is None or cp is None else fg <= cp,
                     "" if fg is None or cp is None else f"{fg * 1e3:.1f} us against {cp * 1e3:.1f} us"))
    for mine, others in ((GRAPH_FUSED, (DIRECT_THREE, DIRECT_FUSED, GRAPH_THREE, *PEERS)), (GRAPH_BEST, PEERS)):
        out += [c for peer in others if (c := _versus(record, mine, peer, sizes)) is not None]
    d3, g3 = med(DIRECT_THREE, small), med(GRAPH_THREE, small)
    if d3 and g3:
        out.append(Claim(f"a graph makes the three kernels >= 3x faster at {power(small)}", d3 / g3, ">= 3x",
                         d3 / g3 >= 3, f"{d3 / g3:.1f}x"))
    d3, g3, f1 = med(DIRECT_THREE, large), med(GRAPH_THREE, large), med(DIRECT_FUSED, large)
    if d3 and g3:
        out.append(Claim(f"a graph changes the three kernels' time by less than 5% at {power(large)}", g3 / d3,
                         "within 5%", abs(g3 / d3 - 1) < 0.05, f"{g3 / d3:.3f}x"))
    if f1 and g3:
        out.append(Claim(f"fusion without a graph beats a graph without fusion at {power(large)}", g3 / f1, "> 1x",
                         f1 < g3, f"{g3 / f1:.2f}x"))
    return out


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


def _options(parser: argparse.ArgumentParser) -> None:
    add_options(parser, list(KEYS), repeats=25)
    parser.add_argument("--no-arguments", action="store_true", help="skip host time against array arguments")
    parser.add_argument("--no-plots", action="store_true", help="write JSON only")
    parser.add_argument("--merge", action="store_true",
                        help="add these variants to the result already in the output folder (a separate process "
                             "per peer keeps one that fails from taking the others with it)")
    parser.add_argument("--compile-per-size", action="store_true",
                        help=f"torch.compile once per size ({peers.describe_torch_compile(dynamic=False)}) "
                             f"instead of once for every size ({peers.describe_torch_compile()}), written to "
                             f"{CompiledPerSize.SCHEMA}.json, not {LaunchesRun.SCHEMA}.json")


def _report(record: LaunchesRun) -> None:
    print("api:", record.api)
    print("counted:", {k: f"{v.launches} launches, {v.trips} trips, {v.bytes_per_element:g} B/element"
                       for k, v in record.pipelines.items()})
    print("graph replay bitwise equal to direct launches:", record.bitwise)
    print(argument_table(record))
    for which in ("lazy", "explicit", "graph") if record.argument_costs else ():
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


def _run(args: argparse.Namespace) -> int:
    if hasattr(signal, "SIGUSR1"):  # `timeout -s USR1` then prints where a stuck run is, every thread
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    if is_simulator():
        print("backend: simulator -- checks the direct launches at tiny sizes; graphs and times need a GPU")
    previous = load(_kind(args), args.out or folder_for(Provenance.here())) if args.merge else None

    def keep(partial: LaunchesRun) -> Any:
        return save(partial if previous is None else merge(copy.deepcopy(previous), partial), args.out)

    record = run(args.sizes, [KEYS[k] for k in args.impl], repeats=args.repeats, checkpoint=keep,
                 arguments=not args.no_arguments and previous is None, dynamic=False if args.compile_per_size else None)
    record = record if previous is None else merge(previous, record)
    path = save(record, args.out)
    print(f"wrote {path}")
    if not args.no_plots and not record.simulated:
        for name, fig in (("launches_arguments", plot_argument_costs(record)),
                          ("launches_two_by_two", plot_two_by_two(record))):
            fig.savefig(path.parent / f"{name}.png", dpi=120)
            print(f"wrote {path.parent / f'{name}.png'}")
    _report(record)
    return 1 if any(not c.passed for c in record.checks) else 0


def _kind(args: argparse.Namespace) -> type[LaunchesRun]:
    """The record a run writes: compiled per size, a file of its own."""
    return CompiledPerSize if args.compile_per_size else LaunchesRun


def _check(args: argparse.Namespace) -> None:
    check_sizes(args.sizes, bytes_per_element=8 * np.dtype(DTYPE).itemsize)
    if args.merge:
        try:
            load(_kind(args), args.out or folder_for(Provenance.here()))
        except ResultError as missing:
            raise ValueError(f"--merge needs an earlier result to add to: {missing}") from None


COMMANDS = [Command("", "Host time per launch against array arguments, and {three kernels, fused} x "
                        "{direct, CUDA graph} over sizes beside CuPy and torch.", _run, options=_options, check=_check)]
