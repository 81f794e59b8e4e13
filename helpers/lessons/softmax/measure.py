"""Lesson 11's softmax, measured: ``python -m helpers.lessons.softmax softmax [--quick]``.

Every implementation is checked first (fresh random inputs, a poisoned output, against
float64 NumPy on sampled rows) and only then timed with CUDA events (GPU time, median of
repeats); one that fails is kept in the record, untimed, with the reason.  The record goes
to ``results/<device>/reductions_softmax.json`` (or ``--out``) after every shape, so a run
cut short keeps what it measured; notebook 11 reads the committed H200 one.  In the
simulator only the checks run, at tiny sizes, and nothing is written.

:class:`Case` and :func:`measure_cases` are the check-then-time loop attention's and
AdamW's measurements use too.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from numba import cuda

from helpers import results
from helpers.backend import is_simulator
from helpers.checks import poison
from helpers.harness.cli import Command
from helpers.timing import copy_bandwidth, time_gpu

from . import kernels as softmax
from .record import Measured, SoftmaxBench, SoftmaxRow
from .report import save_plot, softmax_table

SOFTMAX_SHAPES = [(16384, 4096), (4096, 4096), (4096, 1024)]  # the largest first: a run cut short keeps it
SIMULATOR_SHAPES = [(8, 37), (5, 70)]
TOLERANCE = 1e-5  # relative, against float64


@dataclass
class Case:
    """One implementation to measure: ``check()`` runs it once and returns its error (None: no reference)."""

    name: str
    run: Callable[[], object]
    check: Callable[[], float | None]
    tolerance: float
    note: str = ""
    kernel: Any = None  # a Numba kernel, for its registers per thread
    threads: int | None = None


def registers(kernel: Any) -> int | None:
    """Registers per thread of a compiled Numba kernel (the most over its compiled versions); None if unknown."""
    if kernel is None or is_simulator():
        return None
    try:
        regs = kernel.get_regs_per_thread()
        return int(max(regs.values())) if isinstance(regs, dict) else int(regs)
    except Exception:  # noqa: BLE001 -- a missing figure must not stop a measurement
        return None


def measure_cases(cases: Sequence[Case], repeats: int) -> list[Measured]:
    """Check each case, then time the ones that passed; a failing or refusing one is kept untimed, saying why."""
    measured = []
    for case in cases:
        try:
            error = case.check()
        except RuntimeError as exc:  # a library that refuses these shapes
            measured.append(Measured(case.name, None, note=f"not run: {str(exc).splitlines()[0][:80]}"))
            continue
        passed = error is None or error < case.tolerance
        timing = time_gpu(case.run, label=case.name, repeats=repeats, warmup=2) if passed else None
        measured.append(Measured(case.name, None if timing is None else timing.median_ms,
                                 None if timing is None else timing.spread_ms, error,
                                 case.note if passed else "WRONG: not timed", registers(case.kernel), case.threads))
    return measured


def torch_on_gpu() -> Any:
    """The torch module when it can use a GPU here, else None."""
    try:
        import torch  # optional: the measurements run without torch, with no torch rows
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def checked_output(run: Callable[[], object], out: Any, error: Callable[[np.ndarray], float]) -> Callable[[], float]:
    """A check that poisons ``out``, runs once and measures the error of what ``out`` holds."""
    def check() -> float:
        poison(out)
        run()
        cuda.synchronize()
        return error(out.copy_to_host())
    return check


def softmax_error(got: np.ndarray, x: np.ndarray, rows: np.ndarray) -> float:
    """Largest relative error over the sampled rows, against float64; inf if anything is unwritten."""
    if np.isnan(got).any():
        return math.inf
    ref = softmax.reference(x[rows])
    return float(np.max(np.abs(got[rows] - ref) / ref))


def numba_cases(x: np.ndarray, dx: Any, out: Any, error: Callable[[np.ndarray], float], variants: bool) -> list[Case]:
    """The four Numba softmaxes at the shape of ``x`` (with their block-size variants on a GPU)."""
    rows, cols = x.shape
    row_max, row_sum = cuda.device_array(rows, np.float32), cuda.device_array(rows, np.float32)
    e = cuda.device_array((rows, cols), np.float32)
    gpu_variants = variants and not is_simulator()
    one = softmax.default_threads(cols)
    runs: list[tuple[str, Callable[[], object], Any, int]] = [
        ("numba unfused (4 kernels)", lambda: softmax.run_unfused(dx, row_max, e, row_sum, out),
         softmax.subtract_exp_kernel, 256)]
    for t in sorted({t for t in (64, 128, 256) if cols <= 64 * t} | {one}) if gpu_variants else [one]:
        runs.append((f"numba fused, {t} threads/row", lambda t=t: softmax.run_fused(dx, out, t),
                     softmax.rows_kernel(cols, t), t))
    for t, per_block in [(128, 2), (128, 4), (128, 8), (64, 4)] if gpu_variants else [(one, 2)]:
        if cols <= 64 * t:
            runs.append((f"numba fused pipelined, {t} threads, {per_block} rows/block",
                         lambda t=t, b=max(1, rows // per_block): softmax.run_pipelined(dx, out, t, b),
                         softmax.pipelined_kernel(cols, t), t))
    t = one if is_simulator() else 256
    runs.append((f"numba online, {t} threads/row", lambda t=t: softmax.run_online(dx, out, t),
                 softmax.online_softmax_kernel, t))
    return [Case(name, run, checked_output(run, out, error), TOLERANCE, kernel=kernel, threads=t)
            for name, run, kernel, t in runs]


def torch_cases(torch: Any, x: np.ndarray, error: Callable[[np.ndarray], float]) -> list[Case]:
    """torch.softmax, the naive composition and torch.compile of it, on a copy of ``x``."""
    tx = torch.as_tensor(x, device="cuda")

    def naive(t: Any) -> Any:
        z = (t - t.max(dim=1, keepdim=True).values).exp()
        return z / z.sum(dim=1, keepdim=True)

    compiled = torch.compile(naive, dynamic=False)
    runs = [("torch.softmax", lambda: torch.softmax(tx, dim=1)), ("naive torch", lambda: naive(tx)),
            ("torch.compile(naive)", lambda: compiled(tx))]
    return [Case(name, fn, lambda fn=fn: error(fn().cpu().numpy()), TOLERANCE) for name, fn in runs]


def bench_softmax(shapes: Sequence[tuple[int, int]], repeats: int = 30, variants: bool = True,
                  keep: Callable[[SoftmaxBench], object] | None = None) -> SoftmaxBench:
    """Every softmax at every shape, checked then timed; ``keep(record)`` after each shape."""
    torch = torch_on_gpu()
    ceiling = None
    if not is_simulator():
        ceiling = copy_bandwidth(max(r * c for r, c in shapes), repeats=repeats)[1]
        print(f"copy ceiling {ceiling:.0f} GB/s")
    bench = SoftmaxBench(copy_ceiling_gbs=ceiling)
    rng = np.random.default_rng()
    for rows, cols in shapes:
        x = (rng.standard_normal((rows, cols), dtype=np.float32) * 2).astype(np.float32)
        sample = np.unique(np.r_[rng.integers(0, rows, 200), rows - 1])

        def error(got: np.ndarray) -> float:
            return softmax_error(got, x, sample)

        cases = numba_cases(x, cuda.to_device(x), cuda.device_array((rows, cols), np.float32), error, variants)
        cases += torch_cases(torch, x, error) if torch is not None else []
        row = SoftmaxRow(rows, cols, 8 * rows * cols, measure_cases(cases, repeats))
        bench.rows.append(row)
        if keep is not None:
            keep(bench)  # after every shape: a run cut short keeps what it measured
        print(f"softmax {rows} x {cols}\n{softmax_table(SoftmaxBench(copy_ceiling_gbs=None, rows=[row]))}")
    return bench


def keeper(args: argparse.Namespace) -> Callable[[results.Record], object] | None:
    """What saves a record part-way through a run (to ``--out``, else results/<device>/); None in the simulator."""
    if is_simulator():
        print("simulator: checking correctness at tiny sizes; no times (they would say nothing about a GPU)")
        return None
    return lambda record: results.save(record, args.out)


def quick_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="fewer variants and repeats")


def run_softmax(args: argparse.Namespace) -> SoftmaxBench | None:
    keep = keeper(args)
    shapes = SIMULATOR_SHAPES if is_simulator() else SOFTMAX_SHAPES
    bench = bench_softmax(shapes, repeats=10 if args.quick else 30, variants=not args.quick, keep=keep)
    return None if keep is None else bench


def plots_command(part: str, save_plot: Callable[[Path | None], Path | None]) -> Command:
    """The ``plots`` command of a lesson: draw its committed record (no GPU needed)."""
    def run(args: argparse.Namespace) -> int:
        path = save_plot(args.out)  # None, said why, without a committed record
        if path is not None:
            print("wrote", path)
        return 0
    return Command("plots", f"draw the committed {part} record as reductions_{part}.png (no GPU needed)", run)


COMMANDS = [
    Command("softmax", "check, then time, every softmax against torch (reductions_softmax.json)", run_softmax,
            quick_option),
    plots_command("softmax", save_plot),
]
