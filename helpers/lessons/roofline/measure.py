"""Notebook 07's measurement (GPU only): every fused variant beside torch.compile, the copy and the 3:1
streaming kernels, each checked against NumPy at every size before it is timed, then compared bit for bit."""

from __future__ import annotations

import argparse
from typing import Any

from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import CheckFailed
from helpers.device import banner, registers_per_thread
from helpers.harness import peers
from helpers.harness.campaign import Builder, Case, Checked, Pool, on_device, run_cases, whole
from helpers.harness.cli import Command
from helpers.harness.tables import power_label
from helpers.harness.device_checks import check_on_device
from helpers.results import Claim, save
from helpers.timing import copy_bandwidth, time_gpu

from .kernels import VARIANT_INFO, VARIANTS, run_stream3, stream3_kernel
from .record import Roofline, RooflineRun, Timed
from .report import NEAR_BEST_PERCENT, plot_roofline, summary

BENCH_SIZES = (2**26, 2**26 + 3, 2**28, 2**28 + 3)
CHECK_SIZES = (2**26, 2**28)
FUSED_BYTES_PER_ELEMENT = 16  # float32: read a, b, c and write out, 4 bytes each
STREAM3, TORCH, STREAM3_TORCH = "stream3", "torch_compile", "stream3_torch_compile"
KERNELS = {**{name: v.kernel for name, v in VARIANT_INFO.items()}, STREAM3: stream3_kernel}


def _summed(pool: Pool, builder: Builder) -> Builder:
    """``builder``'s cases checked against ``a + b + c`` (the streaming kernels' sum), not the chapter's answer."""
    def case(n: int) -> Case:
        made = builder(n)
        made.expected = cuda.to_device(sum(x[:n] for x in pool.host))
        return made

    return case


def _sum3(a: Any, b: Any, c: Any) -> Any:
    return a + b + c


def factories() -> dict[str, peers.Factory]:
    """Every variant, the Numba and torch.compile 3:1 streaming kernels, and torch.compile of the expression
    (once per size, ``dynamic=False``: the strongest peer at each size)."""
    made: dict[str, peers.Factory] = {
        name: (lambda pool, launch=launch: peers.numba_fused(pool, launch)) for name, launch in VARIANTS.items()}
    made[STREAM3] = lambda pool: _summed(pool, peers.numba_fused(pool, run_stream3))
    made[TORCH] = lambda pool: peers.torch_compiled(pool, dynamic=False)
    made[STREAM3_TORCH] = lambda pool: _summed(pool, peers.torch_compiled(pool, dynamic=False, expression=_sum3))
    return made


def _place(row: RooflineRun, label: str, entry: Timed) -> None:
    if label in VARIANTS:
        row.variants[label] = entry
    else:
        setattr(row, label, entry)


def _bitwise(case: Case) -> bool:
    """Whether the output just checked is the expected one bit for bit (it was within rounding)."""
    try:
        check_on_device(on_device(case.output()), case.expected, name="bitwise", rtol=0.0)
        return True
    except CheckFailed:
        return False


def benchmark(sizes: tuple[int, ...] = BENCH_SIZES, repeats: int = 30, s: float = 1.7) -> Roofline:
    """Time every variant, torch.compile, the copy and the 3:1 streaming kernels in one run (GPU only)."""
    peers.require_gpu("the roofline benchmark (it times real kernels)")
    pool = Pool(max(sizes), seed=7, s=s)
    runs = {n: RooflineRun(copy=_copy(n, repeats)) for n in sizes}
    prepared = peers.prepare(factories(), pool)

    def time(label: str, n: int, case: Case) -> None:
        timing = time_gpu(case.run, label=label, repeats=repeats)
        a, b, c, _, _, out = pool.views(n)
        kernel = KERNELS.get(label)
        _place(runs[n], label, Timed(
            median_ms=timing.median_ms, iqr_ms=timing.spread_ms, repeats=len(timing.samples_ms),
            gbs=timing.bandwidth_gbs(FUSED_BYTES_PER_ELEMENT * n), bitwise_equal=_bitwise(case),
            registers=None if kernel is None else registers_per_thread(kernel, (a, b, c, pool.s, out))))

    def report(check: Checked) -> None:
        if not check.passed and check.n in runs:
            _place(runs[check.n], check.label, Timed(error=(check.error or "")[:500]))

    failed = run_cases(prepared.builders, sizes, pool=pool, report=report, time=time, progress=False)
    for label, why in failed.items():  # dropped: every later size says why
        for row in runs.values():
            if label not in row.variants and getattr(row, label, None) is None:
                _place(row, label, Timed(error=why[:500]))
    peers.release_memory()
    return summarize(Roofline(expression="out = (a + b) * c / s", dtype="float32", s=s,
                              bytes_per_element=FUSED_BYTES_PER_ELEMENT, sizes=list(sizes), runs=runs))


def _copy(n: int, repeats: int) -> Timed:
    timing, gbs = copy_bandwidth(n, repeats=repeats)  # type: ignore[misc]  # None only in the simulator
    return Timed(median_ms=timing.median_ms, iqr_ms=timing.spread_ms, gbs=gbs)


def summarize(record: Roofline) -> Roofline:
    """Name the best variant and check two claims at 2^26 and 2^28: near the best streaming kernel, and vs torch.compile."""
    claims: list[Claim] = []
    for n in CHECK_SIZES:
        row = record.runs.get(n)
        if row is None:
            continue
        best = row.fastest_variant()
        power = power_label(n)
        if best is None:
            claims.append(Claim(f"a fused variant is correct and timed at {power}", None, "one or more", False))
            continue
        entry = row.variants[best]
        pct = row.percent_of_best(entry)
        claims.append(Claim(
            f"the fastest fused variant ({best}) is within {100 - NEAR_BEST_PERCENT:.0f}% of the best 3:1 streaming "
            f"kernel at {power}", pct, f">= {NEAR_BEST_PERCENT:.0f}%", None if pct is None else pct >= NEAR_BEST_PERCENT,
            "" if pct is None else f"{pct:.1f}%"))
        torch_ms = row.torch_compile.median_ms if row.torch_compile else None
        if torch_ms is not None and entry.median_ms is not None:
            diff = entry.median_ms / torch_ms - 1
            spread = max(entry.iqr_ms or 0.0, row.torch_compile.iqr_ms or 0.0)  # type: ignore[union-attr]
            tie = abs(entry.median_ms - torch_ms) <= spread
            claims.append(Claim(
                f"{best} is as fast as torch.compile at {power}", diff, "no slower, or within one interquartile range",
                entry.median_ms <= torch_ms or tie,
                f"{entry.median_ms:.4f} against {torch_ms:.4f} ms ({diff:+.1%}; interquartile range {spread * 1e3:.1f} µs)"))
    largest = record.runs.get(max(CHECK_SIZES))
    record.best_variant = largest.fastest_variant() if largest else None
    record.claims = claims
    return record


def _run(args: argparse.Namespace) -> int:
    print(banner())
    if is_simulator():
        print("no GPU: the roofline benchmark times real kernels; nothing measured")
        return 0
    record = benchmark(repeats=args.repeats)
    path = save(record, folder=args.out)
    plot_roofline(record, 2**28).savefig(path.with_suffix(".png"), dpi=120)
    print(summary(record))
    for claim in record.claims:
        print(claim.line())
    print("wrote", path, path.with_suffix(".png"))
    return 0


COMMANDS = [Command("", benchmark.__doc__.splitlines()[0], _run, options=lambda parser: parser.add_argument(
    "--repeats", type=whole(1, "repeats"), default=30, help="timed repeats per kernel and size"))]
