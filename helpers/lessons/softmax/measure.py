"""Lesson 11's softmax, measured through the harness's check-then-time loop, each shape a size of its own
(``n`` = the rows, checked first at an odd count, its last rows against float64 NumPy on the device).

Attention's and AdamW's checks are relative to the scale of an output, which an element-by-element
comparison cannot express: :func:`measure_sizes` is their check-then-time loop.
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
from helpers.device import registers_per_thread
from helpers.harness.campaign import Builder, Case, odd_size, on_device, reason, run_cases
from helpers.harness.cli import Command
from helpers.harness.device_checks import poison_on_device
from helpers.harness.peers import Unavailable, describe_torch_compile, prepare, require_gpu_module, torch_compile
from helpers.timing import Timing, copy_bandwidth, time_gpu

from . import kernels as softmax
from . import vector
from .record import HOST_TIME_IN_IT, Measured, SoftmaxBench, SoftmaxRow
from .report import save_plot, softmax_table

SOFTMAX_SHAPES = [(16384, 4096), (4096, 4096), (4096, 1024)]  # the largest first: a run cut short keeps it
SIMULATOR_SHAPES = [(8, 37), (5, 70)]
CHECKED_ROWS = 256  # the last rows of each output (the odd tail among them), compared with float64


def measured(name: str, timing: Timing | None, error: float | None, note: str = "", kernel: Any = None,
             threads: int | None = None) -> Measured:
    """A record's row for one timed (or, in the simulator, untimed) implementation; a time that includes the host's
    cost of issuing the work (too long to hide behind a hold, :func:`helpers.timing.time_gpu`) says so in its note."""
    if timing is not None and timing.launch_hidden is False:
        note = "; ".join(filter(None, (note, HOST_TIME_IN_IT)))
    return Measured(name, None if timing is None else timing.median_ms, None if timing is None else timing.spread_ms,
                    error, note, None if kernel is None else registers_per_thread(kernel), threads)



def flat(array: Any) -> Any:
    """A contiguous Numba device array as one dimension (a view)."""
    return array.reshape(array.size)


class Rows:
    """One shape's matrices for :func:`run_cases`: size ``n`` is the first n rows."""

    def __init__(self, rows: int, cols: int) -> None:
        self.x = (np.random.default_rng().standard_normal((rows, cols), dtype=np.float32) * 2).astype(np.float32)
        self.dx, self.out, self.e = cuda.to_device(self.x), cuda.device_array_like(self.x), cuda.device_array_like(self.x)
        self.row_max, self.row_sum = cuda.device_array(rows, np.float32), cuda.device_array(rows, np.float32)
        self.checked = slice(0, 0)
        self.answer = np.empty((0, cols))
        self.expected: Any = None

    def load_expected(self, n: int) -> None:
        """float64 NumPy's softmax of the last :data:`CHECKED_ROWS` of the first n rows (run_cases asks per size)."""
        self.checked = slice(max(0, n - CHECKED_ROWS), n)
        self.answer = softmax.reference(self.x[self.checked]).ravel()  # flat: the device check goes element by element
        self.expected = cuda.to_device(self.answer.astype(np.float32))

    def error(self, got: Any) -> float:
        """Largest relative error of the checked rows of ``got``, against float64; inf if any is unwritten."""
        got = on_device(got).copy_to_host()
        return math.inf if np.isnan(got).any() else float(np.max(np.abs(got - self.answer) / self.answer))


def numba_builder(rows: Rows, launch: Callable[..., None]) -> Builder:
    """A Numba softmax of the first n rows, ``launch(x, out, row_max, e, row_sum)``."""
    def case(n: int) -> Case:
        x, out, row_max, e, row_sum = rows.dx[:n], rows.out[:n], rows.row_max[:n], rows.e[:n], rows.row_sum[:n]
        return Case(lambda: launch(x, out, row_max, e, row_sum), lambda: flat(rows.out[rows.checked]),
                    lambda: poison_on_device(flat(out)), expected=rows.expected)
    return case


def numba_softmaxes(cols: int, variants: bool) -> dict[str, tuple[Callable[..., None], Any, int]]:
    """name -> (launch, kernel, threads): the four Numba softmaxes (their block-size variants on a GPU)."""
    gpu_variants = variants and not is_simulator()
    one = softmax.default_threads(cols)
    runs = {"numba unfused (4 kernels)": (lambda x, out, m, e, s: softmax.run_unfused(x, m, e, s, out),
                                          softmax.subtract_exp_kernel, 256)}
    for t in sorted({t for t in (64, 128, 256) if cols <= 64 * t} | {one}) if gpu_variants else [one]:
        runs[f"numba fused, {t} threads/row"] = (lambda x, out, *_, t=t: softmax.run_fused(x, out, t),
                                                 softmax.rows_kernel(cols, t), t)
    for t, per_block in [(128, 2), (128, 4), (128, 8), (64, 4)] if gpu_variants else [(one, 2)]:
        if cols <= 64 * t:
            runs[f"numba fused pipelined, {t} threads, {per_block} rows/block"] = (
                lambda x, out, *_, t=t, b=per_block: softmax.run_pipelined(x, out, t, max(1, x.shape[0] // b)),
                softmax.pipelined_kernel(cols, t), t)
    for config in vector_configs(cols, gpu_variants):
        runs[f"numba 16-byte, {config.lanes} lanes/row, {config.rows_per_block} rows/block"] = (
            lambda x, out, *_, c=config: vector.run_vector(x, out, c), vector.vector_kernel(cols, config),
            config.threads())
    t = one if is_simulator() else 256
    runs[f"numba online, {t} threads/row"] = (lambda x, out, *_, t=t: softmax.run_online(x, out, t),
                                              softmax.online_softmax_kernel, t)
    return runs


def fitting(configs: Sequence[Any], size: int) -> list[Any]:
    """The configurations whose ``check(size)`` passes (the others cannot run this size)."""
    return [config for config in configs if softmax.fits(config, size)]


def vector_configs(cols: int, variants: bool) -> list[vector.VectorConfig]:
    """The 16-byte kernel's shapes timed: every lanes x rows-per-block up to 512 threads that fits ``cols``."""
    if cols % 4:
        return []
    if not variants:
        return [vector.default_vector_config(cols)]
    shapes = [vector.VectorConfig(lanes, rows) for lanes in (32, 64, 128, 256) for rows in (1, 2, 4, 8)
              if lanes * rows <= 512]
    return fitting(shapes, cols)


def torch_builder(rows: Rows, function: Callable[[Any], Any]) -> Builder:
    """``function(x)`` in torch on the first n rows (a fresh output each call: nothing to poison)."""
    torch = require_gpu_module("torch")
    tx = torch.as_tensor(rows.dx, device="cuda")

    def case(n: int) -> Case:
        x, last = tx[:n], []

        def run() -> None:
            last[:] = [function(x)]

        return Case(run, lambda: last[0][rows.checked].reshape(-1), last.clear, expected=rows.expected, poisoned=False)
    return case


def naive(t: Any) -> Any:
    """Softmax as a torch user writes it: five eager kernels (max, subtract, exp, sum, divide)."""
    z = (t - t.max(dim=1, keepdim=True).values).exp()
    return z / z.sum(dim=1, keepdim=True)


TORCH_SOFTMAXES: dict[str, Callable[[Rows], Builder]] = {
    "torch.softmax": lambda rows: torch_builder(rows, lambda t: t.softmax(dim=1)),
    "naive torch": lambda rows: torch_builder(rows, naive),
    # one compilation per shape, as the committed H200 record was measured (each shape is timed alone)
    "torch.compile(naive)": lambda rows: torch_builder(rows, torch_compile(naive, dynamic=False)),
}


def measure_shape(rows: int, cols: int, repeats: int, variants: bool) -> SoftmaxRow:
    """Every softmax at one shape through :func:`run_cases` (one size: ``rows``, checked first at an odd count)."""
    pool = Rows(rows, cols)
    numba = numba_softmaxes(cols, variants)
    factories = {name: (lambda p, launch=launch: numba_builder(p, launch)) for name, (launch, _, _) in numba.items()}
    prepared = prepare({**factories, **TORCH_SOFTMAXES}, pool)  # type: ignore[arg-type]
    notes = {"torch.compile(naive)": describe_torch_compile(dynamic=False)}
    done: dict[str, Measured] = {}

    def time(label: str, n: int, case: Case) -> None:
        timing = time_gpu(case.run, label=label, repeats=repeats, warmup=2, flush_l2=True)
        kernel, threads = numba[label][1:] if label in numba else (None, None)
        done[label] = measured(label, timing, pool.error(case.output()), notes.get(label, ""), kernel, threads)

    order = list(prepared.builders)
    failed = run_cases(prepared.builders, [rows], pool=pool, report=lambda checked: None,  # type: ignore[arg-type]
                       time=time, progress=False)
    done.update({label: Measured(label, None, note=f"not timed: {why[:100]}") for label, why in failed.items()})
    return SoftmaxRow(rows, cols, 8 * rows * cols, [done[label] for label in order])


def bench_softmax(shapes: Sequence[tuple[int, int]], repeats: int = 30, variants: bool = True,
                  keep: Callable[[SoftmaxBench], object] | None = None) -> SoftmaxBench:
    """Every softmax at every shape, checked then timed; ``keep(record)`` after each shape."""
    ceiling = None
    if not is_simulator():
        ceiling = copy_bandwidth(max(r * c for r, c in shapes), repeats=repeats, flush_l2=True)[1]
        print(f"copy ceiling {ceiling:.0f} GB/s (L2 flushed before each repeat)")
    bench = SoftmaxBench(copy_ceiling_gbs=ceiling, l2_flushed=True)
    for rows, cols in shapes:
        row = measure_shape(rows, cols, repeats, variants)
        bench.rows.append(row)
        if keep is not None:
            keep(bench)  # after every shape: a run cut short keeps what it measured
        print(f"softmax {rows} x {cols}\n{softmax_table(SoftmaxBench(copy_ceiling_gbs=None, rows=[row]))}")
    return bench


@dataclass
class Implementation:
    """One implementation at one size: ``error()`` runs it once and measures its error (None: it is the reference)."""

    name: str
    run: Callable[[], object]
    error: Callable[[], float | None]
    tolerance: float
    note: str = ""
    kernel: Any = None  # a Numba kernel, for its registers per thread
    threads: int | None = None


def checked_output(run: Callable[[], object], out: Any, error: Callable[[np.ndarray], float]) -> Callable[[], float]:
    """An ``error()`` that poisons ``out``, runs once and measures what ``out`` holds."""
    def check() -> float:
        poison_on_device(flat(out))
        run()
        cuda.synchronize()
        return error(out.copy_to_host())
    return check


def _check(impl: Implementation) -> tuple[float | None, str | None]:
    """``impl``'s error, and why it fails its check (None when it passes)."""
    try:
        error = impl.error()
    except Exception as exc:  # a library that refuses these shapes, a block that does not fit: never timed
        return None, f"not run: {reason(exc).splitlines()[0][:100]}"
    return error, None if error is None or error < impl.tolerance else f"WRONG, not timed: error {error:.1e}"


def measure_sizes(build: Callable[[int], list[Implementation]], sizes: Sequence[int], repeats: int,
                  done: Callable[[int, list[Measured]], object]) -> None:
    """Check every implementation at an odd size, then check and time each at every size, ``done(n, rows)`` after each.

    One that fails a check is kept in the rows untimed, with why, and never timed at a later size.
    """
    failed = {impl.name: why for impl in build(odd_size(sizes)) if (why := _check(impl)[1])}
    for n in sizes:
        rows = []
        for impl in build(n):
            error, why = (None, failed[impl.name]) if impl.name in failed else _check(impl)
            if why:
                failed[impl.name] = why
                rows.append(Measured(impl.name, None, max_rel_err=error, note=why))
                continue
            timing = time_gpu(impl.run, label=impl.name, repeats=repeats, warmup=2)
            rows.append(measured(impl.name, timing, error, impl.note, impl.kernel, impl.threads))
        done(n, rows)


def gpu_torch() -> Any:
    """torch, when it can run on a GPU here; else None, saying why."""
    try:
        return require_gpu_module("torch")
    except Unavailable as why:
        print(f"torch: {why}")
        return None


def keeper(args: argparse.Namespace) -> Callable[[results.Record], object] | None:
    """What saves a record part-way through a run (to ``--out``, else results/<device>/); None in the simulator."""
    if is_simulator():
        print("simulator: checking correctness at tiny sizes; no times (they would say nothing about a GPU)")
        return None
    return lambda record: results.save(record, args.out)


def quick_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="fewer variants and repeats")


def plots_command(part: str, save_plot: Callable[[Path | None], Path | None]) -> Command:
    """The ``plots`` command of a lesson: draw its committed record (no GPU needed)."""
    def run(args: argparse.Namespace) -> int:
        path = save_plot(args.out)  # None, said why, without a committed record
        if path is not None:
            print("wrote", path)
        return 0
    return Command("plots", f"draw the committed {part} record as reductions_{part}.png (no GPU needed)", run)


def run_softmax(args: argparse.Namespace) -> SoftmaxBench | None:
    keep = keeper(args)
    shapes = SIMULATOR_SHAPES if is_simulator() else SOFTMAX_SHAPES
    bench = bench_softmax(shapes, repeats=10 if args.quick else 30, variants=not args.quick, keep=keep)
    return None if keep is None else bench


COMMANDS = [
    Command("softmax", "check, then time, every softmax against torch (reductions_softmax.json)", run_softmax,
            quick_option),
    plots_command("softmax", save_plot),
]
