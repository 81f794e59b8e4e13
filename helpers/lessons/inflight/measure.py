"""Lesson 10's measurement (GPU only): the two ingredients of the bytes-in-flight model, and the series' kernels.

:func:`measure_latency` (a pointer chase far past the L2) and :func:`measure_op_latency` (dependent
float32 operations); :func:`measure_curve` (probes with 1, 2 or 4 groups per thread in flight, 4- or
16-byte accesses, 1 to 8 blocks per SM: bandwidth against bytes in flight per SM);
:func:`measure_kernels` (the series' kernels, checked, timed, their occupancy read from the compiled
code) and :func:`measure_pipelines` (the 2x2 of {4-byte, 16-byte} x {three kernels, fused}).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import poison, random_inputs
from helpers.device import (banner, clock_hz, datasheet_bandwidth_gbs, registers_per_thread, resident_blocks_per_sm,
                            sm_count)
from helpers.harness.campaign import Case, Checked, Pool, run_cases
from helpers.harness.cli import Command
from helpers.harness.device_checks import poison_on_device
from helpers.harness.peers import numba_fused, numba_three, require_gpu
from helpers.lessons.inflight import report
from helpers.lessons.inflight.kernels import (CHAINS, LINE_BYTES, OPS_PER_STEP, chain_reference, chase_buffer,
                                              chase_kernel, chase_reference, kernel_launchers, probe_expected,
                                              probe_kernel, run_probe, run_three_vec4, sm_id_kernel)
from helpers.lessons.inflight.model import (DIAGNOSTICS, NEAR_PERCENT, PIPELINES, READS, SHAPES, WIDTHS, Shape,
                                            bytes_in_flight_per_sm, percent_off, threads_per_sm)
from helpers.lessons.inflight.record import BytesInFlight, ChasePoint, KernelPoint, OpLatency, PipelinePoint, ProbePoint
from helpers.lessons.roofline.kernels import VARIANTS, run_naive
from helpers.results import Claim, folder_for, save
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import copy_bandwidth, time_gpu

UNROLLS = (1, 2, 4)
BLOCKS_PER_SM = (1, 2, 3, 4, 6, 8)
L2_SIZED = 8 << 20  # a chase through at most this much stays in the L2: warmed by a whole cycle, checked step by step


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:400]


def _chase(row: ChasePoint, repeats: int, out: Any) -> None:
    """Time ``row``'s chase ``repeats`` times, each repeat walking on along the cycle, onto lines not yet touched."""
    host, start = chase_buffer(row.footprint_bytes, row.stride_bytes, row.order, seed=row.footprint_bytes % 1000)
    buffer = cuda.to_device(host)
    small = row.footprint_bytes <= L2_SIZED
    lines = row.footprint_bytes // row.stride_bytes  # warm-up: one whole cycle if it fits in the L2, else a short run
    chase_kernel[1, 1](buffer, start, lines if small else 1024, out)
    cuda.synchronize()
    here = int(out.copy_to_host()[0])  # continue from where the warm-up stopped
    begin, stop = cuda.event(), cuda.event()
    for _ in range(repeats):
        begin.record()
        chase_kernel[1, 1](buffer, here, row.steps, out)
        stop.record()
        stop.synchronize()
        end = int(out.copy_to_host()[0])
        if small and end != chase_reference(host, here, row.steps):
            raise RuntimeError("the chase ended at the wrong line")
        here = end
        row.samples_ns.append(begin.elapsed_time(stop) * 1e6 / row.steps)
    row.ns_per_load = statistics.median(row.samples_ns)
    row.fresh = True


def measure_latency(footprints: tuple[int, ...] = (4 << 20, 256 << 20, 1 << 30), steps: int = 1 << 16,
                    stride_bytes: int = LINE_BYTES, repeats: int = 5) -> list[ChasePoint]:
    """ns per dependent load for each footprint, in random and page-local order (one thread).

    The repeats follow one another along the cycle, so past the L2 every timed load meets a line no
    earlier load brought in; a small buffer, warmed by one whole cycle first, measures the L2.
    """
    require_gpu("the pointer chase")
    out = cuda.device_array(1, dtype=np.int32)
    rows = []
    for footprint in footprints:
        for order in ("page_local", "random"):
            row = ChasePoint(footprint_bytes=footprint, stride_bytes=stride_bytes, order=order, steps=steps)
            try:
                _chase(row, repeats, out)
            except Exception as exc:  # keep measuring the others
                row.error = _error(exc)
            rows.append(row)
    return rows


def measure_op_latency(steps: int = 1 << 12, repeats: int = 9) -> list[OpLatency]:
    """ns per dependent float32 add, multiply and divide: one thread, chains of ``steps`` and ``2 * steps``
    (their difference leaves out the launch and set-up), each result checked bitwise against NumPy's."""
    require_gpu("the operation latencies")
    x = cuda.to_device(np.ones(1, dtype=np.float32))
    out = cuda.device_array(1, dtype=np.float32)
    clock = clock_hz()
    rows = []
    for op, (kernel, operand) in CHAINS.items():
        row = OpLatency(op=op, ops=2 * steps * OPS_PER_STEP)
        s = np.float32(operand)
        try:
            times = []
            for k in (steps, 2 * steps):
                poison(out)
                kernel[1, 1](x, s, k, out)
                if out.copy_to_host()[0] != chain_reference(op, 1.0, operand, k):
                    raise RuntimeError(f"the {op} chain of {k * OPS_PER_STEP} operations ended at the wrong value")
                timed = time_gpu(lambda k=k: kernel[1, 1](x, s, k, out), label=f"{op} chain", repeats=repeats)
                times.append(timed.median_ms)
            row.bitwise_equal = True
            row.ns_per_op = (times[1] - times[0]) * 1e6 / (steps * OPS_PER_STEP)
            row.cycles_per_op = None if not clock else row.ns_per_op * 1e-9 * clock
        except Exception as exc:
            row.error = _error(exc)
        rows.append(row)
    return rows


def blocks_per_sm_seen(blocks_per_sm: tuple[int, ...] = BLOCKS_PER_SM) -> dict[int, list[int]]:
    """For a grid of SMs x m blocks: the fewest and most blocks an SM received, and how many SMs got any
    (each SM should hold exactly m: the occupancy knob works)."""
    require_gpu("reading SM ids")
    where = sm_id_kernel()
    sms = sm_count() or 1
    seen: dict[int, list[int]] = {}
    for m in blocks_per_sm:
        ids = cuda.device_array(sms * m, dtype=np.int32)
        where[sms * m, BLOCK_SIZE](ids, 50)
        _, counts = np.unique(ids.copy_to_host(), return_counts=True)  # SM ids need not be contiguous
        seen[m] = [int(counts.min()), int(counts.max()), int(counts.size)]
    return seen


def _probe(row: ProbePoint, grid: int, arrays: tuple[Any, ...], want: np.ndarray, repeats: int) -> None:
    """Check one probe configuration bitwise, then time it (read+write GB/s)."""
    x, y, z, out = arrays
    launch = lambda: run_probe(row.reads, row.width_bytes, row.unroll, grid, x, y, z, out)  # noqa: E731
    poison(out)
    launch()
    cuda.synchronize()
    row.bitwise_equal = bool(np.array_equal(out.copy_to_host(), want))
    t = time_gpu(launch, label="probe", repeats=repeats)
    row.median_ms, row.iqr_ms = t.median_ms, t.spread_ms
    row.gbs = t.bandwidth_gbs(4 * row.n * (row.reads + 1))


def measure_curve(n: int = 1 << 26, repeats: int = 15, reads: tuple[int, ...] = READS,
                  widths: tuple[int, ...] = WIDTHS, unrolls: tuple[int, ...] = UNROLLS,
                  blocks_per_sm: tuple[int, ...] = BLOCKS_PER_SM, log: Callable[[str], None] = print) -> list[ProbePoint]:
    """Every probe configuration, checked bitwise on the inputs it is timed on, then timed (read+write GB/s)."""
    require_gpu("the bandwidth curve")
    sms = sm_count() or 1
    host = random_inputs(n, seed=11)
    arrays = (*(cuda.to_device(h) for h in host), cuda.device_array(n, dtype=np.float32))
    rows = []
    for r in reads:
        want = probe_expected(*host, r)
        for w in widths:
            for u in unrolls:
                groups = n // (w // 4)
                regs = registers_per_thread(probe_kernel(r, w, u), (*arrays, np.int64(groups)))
                fit = resident_blocks_per_sm(regs)
                # resident grids of m blocks per SM; and, for one group per thread, the full grid too
                configs = [(m, sms * m, "resident") for m in blocks_per_sm if m <= fit]
                configs += [(fit, blocks_for(groups), "full")] if u == 1 else []
                for m, grid, kind in configs:  # more blocks than fit would run in waves: not that occupancy
                    threads = threads_per_sm(regs, BLOCK_SIZE, m)
                    row = ProbePoint(reads=r, width_bytes=w, unroll=u, blocks_per_sm=m, registers=regs,
                                     threads_per_sm=threads, loads_per_thread=r * u,
                                     bytes_in_flight_per_sm=bytes_in_flight_per_sm(r * u, w, threads), n=n, grid=kind)
                    try:
                        _probe(row, grid, arrays, want, repeats)
                    except Exception as exc:
                        row.error = _error(exc)
                    rows.append(row)
                    log(f"  probe reads={r} width={w:2d} unroll={u} blocks/SM={m} {kind:8s} regs={regs} "
                        f"in flight {row.bytes_in_flight_per_sm / 1024:6.1f} KiB/SM: "
                        f"{row.gbs or 0:6.0f} GB/s {'' if row.bitwise_equal else row.error or 'WRONG'}")
    return rows


def _checked_and_timed(builders: dict[str, Callable[[int], Case]], n: int, pool: Pool, rows: dict[str, Any],
                       repeats: int, timed: Callable[[str, Case, Any], None]) -> None:
    """:func:`~helpers.harness.campaign.run_cases` at one size: a case that fails keeps its reason in its row;
    ``timed(name, case, timing)`` notes the rest."""
    def noted(check: Checked) -> None:
        if not check.passed:
            rows[check.label].bitwise_equal, rows[check.label].error = False, check.error

    def time_one(name: str, _n: int, case: Case) -> None:
        row = rows[name]
        row.bitwise_equal = bool(np.array_equal(case.output().copy_to_host(), case.expected.copy_to_host()))
        timing = time_gpu(case.run, label=name, repeats=repeats)
        if timing is not None:
            row.median_ms, row.iqr_ms = timing.median_ms, timing.spread_ms
            timed(name, case, timing)

    run_cases(builders, [n], pool=pool, report=noted, time=time_one, progress=False)


def _shape_row(name: str, shape: Shape, n: int, launcher: Any) -> KernelPoint:
    """A kernel's row; with its launcher, its occupancy and bytes in flight, read from its compiled code."""
    row = KernelPoint(name=name, family=shape.family, reads=shape.reads, writes=shape.writes,
                      width_bytes=shape.width_bytes, groups_in_flight=shape.groups_in_flight, grid=shape.grid, n=n)
    if launcher is None:
        row.error = "not available on this backend"
        return row
    row.registers = registers_per_thread(*launcher[:2])
    row.threads_per_sm = threads_per_sm(row.registers)
    row.loads_per_thread = shape.reads * shape.groups_in_flight
    row.bytes_in_flight_per_sm = bytes_in_flight_per_sm(row.loads_per_thread, shape.width_bytes, row.threads_per_sm)
    return row


def measure_kernels(n: int = (1 << 26) + 3, repeats: int = 15, s: float = 1.7,
                    log: Callable[[str], None] = print, shapes: dict[str, Shape] | None = None) -> list[KernelPoint]:
    """Each kernel of :data:`SHAPES`: its occupancy read, checked against NumPy, then timed."""
    require_gpu("the series kernels' bandwidth")
    shapes = SHAPES if shapes is None else shapes
    pool = Pool(n, seed=5, s=s)
    tables: dict[int, dict[str, Any]] = {}

    def launchers(m: int) -> dict[str, Any]:
        if m not in tables:
            tables.clear()  # one size at a time: each table holds every kernel's answer
            a, b, c, t, _, out = pool.views(m)
            tables[m] = kernel_launchers(a, b, c, s, t, out)
        return tables[m]

    def builder(name: str) -> Callable[[int], Case]:
        def case(m: int) -> Case:
            _, _, launch, want = launchers(m)[name]
            out = pool.views(m)[5]
            return Case(launch, lambda: out, lambda: poison_on_device(out), expected=cuda.to_device(want))

        return case

    table = launchers(n)
    rows = {name: _shape_row(name, shape, n, table.get(name)) for name, shape in shapes.items()}

    def timed(name: str, case: Case, timing: Any) -> None:
        shape = shapes[name]
        rows[name].gbs = timing.bandwidth_gbs(4 * n * (shape.reads + shape.writes))

    _checked_and_timed({name: builder(name) for name in shapes if name in table}, n, pool, rows, repeats, timed)
    for row in rows.values():
        log(f"  {row.name:15s} regs={row.registers} threads/SM={row.threads_per_sm} "
            f"in flight {(row.bytes_in_flight_per_sm or 0) / 1024:5.1f} KiB/SM: {row.gbs or 0:6.0f} GB/s "
            f"bitwise={row.bitwise_equal} {row.error or ''}")
    return list(rows.values())


def measure_pipelines(n: int = (1 << 26) + 3, repeats: int = 15, s: float = 1.7) -> list[PipelinePoint]:
    """The four corners of the 2x2, each checked against NumPy, then timed end to end."""
    require_gpu("the 2x2")
    pool = Pool(n, seed=9, s=s)
    builders = {"three kernels, 4-byte": numba_three(pool), "fused, 4-byte": numba_fused(pool, run_naive),
                "three kernels, 16-byte": numba_three(pool, run_three_vec4),
                "fused, 16-byte": numba_fused(pool, VARIANTS["vec4"])}
    rows = {name: PipelinePoint(name=name, width_bytes=width, kernels=kernels, bytes_per_element=per_element, n=n)
            for name, (width, kernels, per_element) in PIPELINES.items()}
    _checked_and_timed(builders, n, pool, rows, repeats, lambda *_: None)
    return list(rows.values())


def with_claims(record: BytesInFlight) -> BytesInFlight:
    """``record`` with its claims: one per kernel (prediction within 10% of the measurement), and the 2x2's two ratios."""
    claims = []
    for k in record.kernels:
        predicted = record.predicted_gbs(k)
        off = percent_off(predicted, k.gbs)
        claims.append(Claim(
            f"the bytes-in-flight model predicts {k.name}'s bandwidth within {NEAR_PERCENT:.0f}%", off,
            f"|error| <= {NEAR_PERCENT:.0f}%", None if off is None else abs(off) <= NEAR_PERCENT,
            "" if off is None else f"predicted {predicted:,.0f}, measured {k.gbs:,.0f} GB/s ({off:+.1f}%)"))
    try:
        for width in (4, 16):
            three = record.pipeline(f"three kernels, {width}-byte").median_ms
            fused = record.pipeline(f"fused, {width}-byte").median_ms
            ratio = None if not three or not fused else three / fused
            claims.append(Claim(f"with {width}-byte accesses, fused is about 2x (the bytes ratio) faster than three kernels",
                                ratio, "within 10% of 2.0x", None if ratio is None else abs(ratio / 2 - 1) <= 0.10,
                                "" if ratio is None else f"{ratio:.2f}x"))
    except KeyError:
        pass
    record.claims = claims
    return record


def _latencies(record: BytesInFlight, log: Callable[[str], None]) -> None:
    """The first stage: the chase, the operation chains, the SMs' blocks, the library's copy."""
    record.chase = measure_latency()
    record.op_latency = measure_op_latency()
    for o in record.op_latency:
        log(f"  {o.op}: {o.ns_per_op or 0:.2f} ns per dependent operation ({o.cycles_per_op or 0:.0f} cycles) "
            f"{o.error or ''}")
    for c in record.chase:
        log(f"  {c.footprint_bytes >> 20:5d} MiB {c.order:10s}: {c.latency_ns() or 0:7.1f} ns per load "
            f"(samples {', '.join(f'{x:.0f}' for x in c.samples_ns)}) {c.error or ''}")
    try:
        record.blocks_per_sm_seen = blocks_per_sm_seen()
    except Exception as exc:
        log(f"  SM ids not read: {_error(exc)}")
    log(f"blocks per SM seen (launched: [fewest, most, SMs used]): {record.blocks_per_sm_seen}")
    try:
        copy = copy_bandwidth(record.n_probe, repeats=record.repeats)
        if copy is not None:
            record.library_copy_gbs, record.library_copy = copy[1], copy[0].label
    except Exception as exc:
        log(f"  library copy failed: {_error(exc)}")


def measure(n_probe: int = 1 << 26, n_kernels: int = (1 << 26) + 3, repeats: int = 15,
            log: Callable[[str], None] = print,
            checkpoint: Callable[[BytesInFlight], object] | None = None) -> BytesInFlight:
    """Everything, in one run: latency, the curve, the series' kernels and the 2x2 (GPU only);
    ``checkpoint`` receives the record after each stage, so a run cut short keeps what it measured."""
    require_gpu("the bytes-in-flight measurement")
    started = time.perf_counter()
    record = BytesInFlight(sms=sm_count() or 0, block_size=BLOCK_SIZE, repeats=repeats, n_probe=n_probe,
                           n_kernels=n_kernels, datasheet_gbs=datasheet_bandwidth_gbs(), chase=[], probes=[],
                           kernels=[], pipelines=[])
    stages: list[tuple[str, Callable[[], None]]] = [
        ("pointer chase", lambda: _latencies(record, log)),
        ("probe curve", lambda: setattr(record, "probes", measure_curve(n_probe, repeats, log=log))),
        ("series kernels", lambda: setattr(record, "kernels", measure_kernels(n_kernels, repeats, log=log))),
        ("diagnostics", lambda: setattr(record, "diagnostics",
                                        measure_kernels(n_kernels, repeats, log=log, shapes=DIAGNOSTICS))),
        ("2x2", lambda: setattr(record, "pipelines", measure_pipelines(n_kernels, repeats))),
    ]
    for name, stage in stages:
        log(f"{name} ...")
        stage()
        record.elapsed_s = time.perf_counter() - started
        if checkpoint is not None:
            checkpoint(with_claims(record))
    return with_claims(record)


def _run(args: argparse.Namespace) -> BytesInFlight | int:
    print(banner())
    if is_simulator():
        print("no GPU: this run times real kernels; nothing measured")
        return 0
    record = measure(args.n_probe, args.n_kernels, args.repeats, checkpoint=lambda r: save(r, folder=args.out))
    print(report.summary(record))
    folder = args.out or folder_for(record.provenance)
    try:
        report.plot_curve(record).savefig(folder / "bytes_in_flight.png", dpi=120)
        report.plot_predictions(record).savefig(folder / "bytes_in_flight_model.png", dpi=120)
    except Exception as exc:  # the JSON is what matters; a plot failure is reported, not fatal
        print(f"plots not drawn: {_error(exc)}")
    print(f"measured in {record.elapsed_s:.0f} s")
    return record


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=15, help="timed repeats per kernel (median reported)")
    parser.add_argument("--n-probe", type=int, default=1 << 26, help="elements per array for the probe curve")
    parser.add_argument("--n-kernels", type=int, default=(1 << 26) + 3, help="elements per array for the kernels")


COMMANDS = [Command("", "Bytes in flight (Little's law): DRAM latency by pointer chase, achieved bandwidth against "
                        "bytes in flight per SM, and each series kernel's bandwidth against the model's prediction",
                    _run, _options)]
