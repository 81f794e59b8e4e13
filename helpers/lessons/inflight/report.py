"""What notebook 10 shows: the tables of latency, occupancy and predictions, the 2x2's ratios, and two figures.

Every function reads a :class:`~helpers.lessons.inflight.record.BytesInFlight` record (the H200's,
committed, or one measured now); nothing here needs a GPU.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from helpers.harness.tables import table
from helpers.lessons.inflight.model import (DIAGNOSTICS, NEAR_PERCENT, PIPELINES, READS, SHAPES, WIDTHS,
                                            average_in_flight_factor, curve_points, implied_latency_ns, littles_law_gbs,
                                            percent_off, read_curve)
from helpers.lessons.inflight.record import BytesInFlight
from helpers.lessons.sweep.record import Sweep
from helpers.results import ResultError, load

MIX_COLORS = {1: "tab:green", 2: "tab:orange", 3: "tab:blue"}
WIDTH_MARKERS = {4: "o", 16: "s"}


def _kib(nbytes: float | None) -> str:
    return "-" if not nbytes else f"{nbytes / 1024:.0f}"


def needed_in_flight_per_sm(record: BytesInFlight, gbs: float, reads: int = 3) -> float | None:
    """Read bytes per SM that must be in flight to sustain ``gbs`` (read+write) at the measured DRAM latency."""
    latency = record.dram_latency_ns()
    if not latency or not record.sms:
        return None
    return gbs * reads / (reads + 1) * latency / record.sms


def pipeline_prediction_ms(record: BytesInFlight, name: str, pooled: bool = False) -> float | None:
    """The model's time for a pipeline: each launch's bytes over its predicted bandwidth, summed."""
    _, kernels, _ = PIPELINES[name]
    row = record.pipeline(name)
    total = 0.0
    for k in kernels:
        kp = record.kernel(k)
        gbs = record.predicted_gbs(kp, pooled)
        if not gbs:
            return None
        total += 4 * row.n * (kp.reads + kp.writes) / (gbs * 1e9) * 1e3
    return total


@dataclass(frozen=True)
class TwoByTwo:
    """The 2x2's ratios (times, three kernels over fused, or 4-byte over 16-byte); None where a corner is missing."""

    fusion_4_byte: float | None  # three kernels / fused, one element per thread
    fusion_16_byte: float | None  # three kernels / fused, one float4 per thread
    width_three_kernels: float | None  # 4-byte / 16-byte, three kernels
    width_fused: float | None  # 4-byte / 16-byte, fused
    both: float | None  # three 4-byte kernels / fused 16-byte kernel


def two_by_two(record: BytesInFlight) -> TwoByTwo:
    """The 2x2's ratios: fused against three kernels at each width, and width against width."""
    t = {name: record.pipeline(name).median_ms for name in PIPELINES}

    def ratio(x: str, y: str) -> float | None:
        return None if not t[x] or not t[y] else t[x] / t[y]

    return TwoByTwo(
        fusion_4_byte=ratio("three kernels, 4-byte", "fused, 4-byte"),
        fusion_16_byte=ratio("three kernels, 16-byte", "fused, 16-byte"),
        width_three_kernels=ratio("three kernels, 4-byte", "three kernels, 16-byte"),
        width_fused=ratio("fused, 4-byte", "fused, 16-byte"),
        both=ratio("three kernels, 4-byte", "fused, 16-byte"),
    )


def sweep_ratio(implementations: tuple[str, str] = ("torch eager", "torch.compile"), n: int = 1 << 28) -> float | None:
    """The committed size sweep's GPU-time ratio of two implementations at ``n`` (the same experiment by other hands)."""
    try:
        sweep = load(Sweep)
    except ResultError:
        return None
    times = {m.implementation: m.median_ms for m in sweep.measurements if m.n == n and m.mode == "gpu"}
    first, second = (times.get(k) for k in implementations)
    return None if not first or not second else first / second


# --- the tables (each notebook prints them in a checked cell: their layouts are fixed) ---------------


def occupancy_table(record: BytesInFlight, merged: bool = False) -> str:
    """Each kernel's loads in flight per thread, registers, resident threads per SM and bytes in flight per SM.

    ``merged``: kernels with the same numbers in every column share one row.
    """
    rows = [[k.name, k.loads_per_thread or 0, k.width_bytes, k.registers or 0, k.threads_per_sm or 0,
             f"{_kib(k.bytes_in_flight_per_sm)} KiB"] for k in record.kernels]
    rows = same_numbers_merged(rows) if merged else rows
    return table(rows, ["kernel", "loads/thread", "bytes/load", "registers", "threads/SM", "in flight/SM"],
                 widths=(15, 12, 10, 9, 10, 12), gap=1)


def chase_table(record: BytesInFlight) -> str:
    """The pointer chase: footprint, order, ns per dependent load."""
    rows = []
    for c in record.chase:
        size = f"{c.footprint_bytes >> 20} MiB" if c.footprint_bytes < 1 << 30 else f"{c.footprint_bytes >> 30} GiB"
        latency = c.latency_ns()
        rows.append([size, c.order, f"{latency:.0f}" if latency else "-", f"({c.error})" if not latency else ""])
    return table(rows, ["footprint", "order", "ns per load", ""], align="rrrl", widths=(10, 11, 11, 0), gap=1)


def loaded_latency_table(record: BytesInFlight, reads: int = 3, width: int = 16) -> str:
    """Little's law solved for the latency along one curve: the latency each probe's rate implies."""
    rows = [[f"{_kib(q)} KiB", f"{gbs:.0f}", f"{latency:.0f} ns"] for q, gbs, latency in loaded_latencies(record, reads, width)]
    return (f"{reads} read{'s' if reads > 1 else ''} : 1 write, {width}-byte probes\n" +
            table(rows, ["in flight/SM", "GB/s", "implied latency"], align="rrr", widths=(12, 6, 15), gap=1))


def prediction_table(record: BytesInFlight) -> tuple[str, int, int]:
    """Predicted against measured GB/s for every kernel; also how many are within 10%, of how many.

    "curve only" is the first step alone (the curve at the peak bytes in flight); the
    last column reads one curve pooled over both access widths instead of the kernel's
    own width: how much the width matters beyond the bytes it puts in flight.  A kernel
    not measured is named below the table.
    """
    rows, missing = [], []
    for k in record.kernels:
        p = record.predicted_gbs(k)
        off = percent_off(p, k.gbs)
        if off is None:
            missing.append(f"{k.name:15s} not measured ({k.error or 'no result'})")
            continue
        pooled = percent_off(record.predicted_gbs(k, pooled=True), k.gbs)
        rows.append([k.name, f"{_kib(k.bytes_in_flight_per_sm)} KiB", f"{record.predicted_gbs(k, arithmetic=False) or 0:.0f}",
                     f"{p:.0f}", f"{k.gbs:.0f}", f"{off:+.1f}%", "yes" if abs(off) <= NEAR_PERCENT else "no",
                     f"{pooled or 0:+.1f}%"])
    columns = ["kernel", "in flight/SM", "curve only", "predicted", "measured", "error", f"within {NEAR_PERCENT:.0f}%",
               "one curve for both widths"]
    text = table(rows, columns, widths=(15, 12, 10, 9, 8, 7, 11, 26), gap=1)
    hits = sum(row[6] == "yes" for row in rows)
    return "\n".join([text, *missing]), hits, len(rows)


def op_latency_table(record: BytesInFlight) -> str:
    """ns (and SM cycles) per dependent float32 operation, as the chains measured them."""
    rows = []
    for o in record.op_latency:
        if o.ns_per_op is None:
            rows.append([o.op, "-", "-", o.error])
        else:
            rows.append([o.op, f"{o.ns_per_op:.1f}", f"{o.cycles_per_op:.0f}" if o.cycles_per_op else "-",
                         "bitwise equal to NumPy" if o.bitwise_equal else "WRONG"])
    return table(rows, ["operation", "ns each", "cycles", "checked"], align="rrrl")


def arithmetic_table(record: BytesInFlight) -> str:
    """Each kernel's extra arithmetic per trip, the latency its loads see, and the share of the trip with loads in flight.

    Formatted by hand: a name longer than its column (``scale_by_reciprocal``) pushes only its own row
    to the right, as in the committed output the notebook checks.
    """
    lines = [f"{'kernel':15s} {'arithmetic':>18s} {'extra per trip':>14s} {'loaded latency':>14s} {'in flight':>9s}"]
    for k in [*record.kernels, *record.diagnostics]:
        shape = SHAPES.get(k.name) or DIAGNOSTICS.get(k.name)
        extra, latency = record.arithmetic_ns(k), record.loaded_latency_ns(k)
        if shape is None or extra is None or latency is None:
            continue
        lines.append(f"{k.name:15s} {' '.join(shape.chain) or '-':>18s} {extra:11.1f} ns {latency:11.0f} ns "
                     f"{average_in_flight_factor(latency, extra):9.1%}")
    return "\n".join(lines)


def same_in_flight_table(record: BytesInFlight) -> str:
    """Kernels against the resident-grid probe of the same mix, width and bytes in flight (one access per thread, 8 blocks per SM)."""
    rows, notes = [], ["resident probe, same bytes in flight"]
    for k in [*record.kernels, *record.diagnostics]:
        if not k.gbs or k.groups_in_flight != 1:
            continue
        probe = same_in_flight_probe(record, k)
        rows.append([k.name, k.grid, f"{k.reads}:1", f"{k.width_bytes}B", f"{_kib(k.bytes_in_flight_per_sm)} KiB",
                     f"{k.gbs:.0f}"])
        notes.append(f"{probe:6.0f} GB/s (kernel {100 * (k.gbs / probe - 1):+.1f}%)" if probe else "-")
    body = table(rows, ["kernel", "grid", "mix", "width", "in flight/SM", "GB/s"], widths=(20, 8, 5, 5, 12, 6), gap=1)
    return "\n".join(f"{line}  {note}" for line, note in zip(body.splitlines(), notes))


def summary(record: BytesInFlight) -> str:
    """What a run prints: the latency, the best per mix, each kernel's prediction against its measurement, the 2x2."""
    lines = [f"DRAM latency (page-local chase): {record.dram_latency_ns() or 0:.0f} ns per load", op_latency_table(record)]
    lines += [f"best measurement, {r} read(s) : 1 write: {record.best_gbs(r) or 0:,.0f} GB/s" for r in READS]
    lines.append(prediction_table(record)[0])
    lines += [f"diagnostic {d.name}: {_kib(d.bytes_in_flight_per_sm)} KiB/SM, {d.gbs or 0:.0f} GB/s, "
              f"bitwise={d.bitwise_equal} {d.error or ''}" for d in record.diagnostics]
    lines.append(table([[p.name, p.median_ms, pipeline_prediction_ms(record, p.name), p.bitwise_equal, p.error or ""]
                        for p in record.pipelines], ["pipeline", "ms", "model ms", "bitwise", ""], align="lrrrl"))
    return "\n".join(lines + [c.line() for c in record.claims])


def plot_curve(record: BytesInFlight, show_kernels: bool = True) -> Any:
    """Achieved bandwidth against bytes in flight per SM: the probes, Little's law, the bound and the best measurements."""
    fig, ax = plt.subplots(figsize=(9, 5))
    for r in READS:
        for w in WIDTHS:
            pts = [p for p in record.probes if p.reads == r and p.width_bytes == w and p.gbs and p.grid == "resident"]
            if pts:
                ax.scatter([p.bytes_in_flight_per_sm / 1024 for p in pts], [p.gbs for p in pts], s=22,
                           marker=WIDTH_MARKERS[w], facecolors="none" if w == 4 else MIX_COLORS[r],
                           edgecolors=MIX_COLORS[r], label=f"probe, {r} read{'s' if r > 1 else ''} : 1 write, {w}-byte")
        best = record.best_gbs(r)
        if best:
            ax.axhline(best, color=MIX_COLORS[r], lw=0.8, ls=":")
    ax.plot([], [], color="gray", lw=0.8, ls=":", label="best measurement of each mix (colour: mix)")
    latency = record.dram_latency_ns()
    qs = np.geomspace(0.5, 512, 60)
    if latency:
        _ = ax.plot(qs, [littles_law_gbs(q * 1024, record.sms, latency, 3, 1) for q in qs], color="gray", lw=1,
                    label=f"Little's law, 3:1, at the idle latency ({latency:.0f} ns)")
    if record.datasheet_gbs:
        ax.axhline(record.datasheet_gbs, color="black", lw=1, ls="--")
        ax.annotate(f"datasheet bound {record.datasheet_gbs:,.0f} GB/s", (500, record.datasheet_gbs), fontsize=8,
                    va="bottom", ha="right")  # at the right: the legend takes the upper left
    draw_model_curves(ax, record)
    if show_kernels:
        for k in record.kernels:
            if k.gbs and k.bytes_in_flight_per_sm:
                ax.scatter([k.bytes_in_flight_per_sm / 1024], [k.gbs], marker="*", s=90, color=MIX_COLORS[k.reads],
                           edgecolors="black", linewidths=0.5, zorder=5)
        ax.scatter([], [], marker="*", s=90, color="white", edgecolors="black", label="series kernels (colour: mix)")
    ax.set_xscale("log", base=2)
    ax.set(xlim=(0.5, 512), ylim=(0, 1.3 * (record.datasheet_gbs or max(p.gbs or 0 for p in record.probes))),
           xlabel="bytes in flight per SM (KiB, reads)", ylabel="achieved GB/s (read + write)")
    if show_kernels:
        label_kernels(ax, record)  # after the limits: the crowded names are placed by them
    return _titled(fig, ax, record, "bandwidth against the bytes each SM keeps in flight", 10, 7, "upper left")


def plot_predictions(record: BytesInFlight) -> Any:
    """Each kernel's predicted bandwidth (open) beside its measurement (filled), with the 10% band around the measurement."""
    rows = [(k, record.predicted_gbs(k)) for k in record.kernels if k.gbs]
    rows = [(k, p) for k, p in rows if p][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.6))
    for y, (k, p) in enumerate(rows):
        color = MIX_COLORS[k.reads]
        ax.plot([k.gbs * (1 - NEAR_PERCENT / 100), k.gbs * (1 + NEAR_PERCENT / 100)], [y, y], color="lightgray", lw=6,
                solid_capstyle="butt", zorder=1)
        ax.plot([k.gbs, p], [y, y], color=color, lw=1, zorder=2)
        ax.scatter([k.gbs], [y], color=color, marker=WIDTH_MARKERS[k.width_bytes], s=36, zorder=3)
        ax.scatter([p], [y], facecolors="white", edgecolors=color, marker=WIDTH_MARKERS[k.width_bytes], s=36, zorder=3)
        curve = record.predicted_gbs(k, arithmetic=False)
        if curve and abs(curve - p) > 0.5:
            ax.scatter([curve], [y], color="gray", marker="|", s=60, zorder=3)
    ax.set_yticks(range(len(rows)), [f"{k.name} ({_kib(k.bytes_in_flight_per_sm)} KiB/SM)" for k, _ in rows], fontsize=8)
    ax.scatter([], [], color="gray", label="measured")
    ax.scatter([], [], facecolors="white", edgecolors="gray", label="predicted: average bytes in flight")
    ax.scatter([], [], color="gray", marker="|", s=60, label="the curve alone (peak bytes in flight)")
    ax.plot([], [], color="lightgray", lw=6, label=f"measured +/- {NEAR_PERCENT:.0f}%")
    ax.set_xlabel("GB/s (read + write); colour: reads per write (green 1, orange 2, blue 3); squares: 16-byte")
    return _titled(fig, ax, record, "each kernel: the model's prediction against its measurement", 9, 8, "upper right")


def _titled(fig: Any, ax: Any, record: BytesInFlight, title: str, size: int, legend_size: int, where: str) -> Any:
    """The figure with its title over the run's provenance, and its legend."""
    ax.set_title(f"{title}\n{record.provenance.describe() if record.provenance else ''}", fontsize=size)
    ax.legend(fontsize=legend_size, loc=where)
    fig.tight_layout()
    return fig


def draw_model_curves(ax: Any, record: BytesInFlight) -> None:
    """The curves the model reads, one per mix and width: the probes' median at each bytes in flight, non-decreasing."""
    for r in READS:
        for w in WIDTHS:
            points = curve_points(record.probes, r, w)
            if points:
                qs, bw = read_curve(points)
                ax.plot(qs / 1024, bw, color=MIX_COLORS[r], lw=1, ls="--" if w == 4 else "-", alpha=0.7, zorder=2)
    for w, ls in ((4, "--"), (16, "-")):
        ax.plot([], [], color="0.25", lw=1.6, ls=ls, label=f"the curve the model reads, {w}-byte (median; colour: mix)")


def label_kernels(ax: Any, record: BytesInFlight, crowded_from_kib: float = 48) -> None:
    """Each series kernel's name beside its star; kernels at one point share a name tag.

    The stars from ``crowded_from_kib`` up sit close together below the bound: their names are stacked in
    the empty lower right, each with a line to its star, in the order whose lines cross least; the others' names
    are stacked below the curves, likewise.
    """
    groups: list[list[Any]] = []
    for x, y, name in sorted((k.bytes_in_flight_per_sm / 1024, k.gbs, k.name) for k in record.kernels
                             if k.gbs and k.bytes_in_flight_per_sm):
        if groups and groups[-1][0] == x and abs(groups[-1][1] - y) < 150:
            groups[-1][2].append(name)  # the same bytes in flight and nearly the same rate: one tag
        else:
            groups.append([x, y, [name]])
    crowded = [g for g in groups if g[0] >= crowded_from_kib]
    top = ax.get_ylim()[1]
    slots = [(150, (0.62 - 0.055 * i) * top) for i in range(len(crowded))]
    for (x, y, names), slot in zip(fewest_crossings(ax, crowded, slots), slots):
        ax.annotate(", ".join(names), (x, y), xytext=slot, fontsize=7, va="center",
                    arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6, relpos=(0, 0.5)))
    apart = sorted((g for g in groups if g[0] < crowded_from_kib), key=lambda g: -g[0])  # rightmost star highest
    for i, (x, y, names) in enumerate(apart):  # below the curves, so that no line crosses a name
        ax.annotate(", ".join(names), (x, y), xytext=(x * 1.1, (0.34 - 0.055 * i) * top), fontsize=7,
                    va="center", arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6, relpos=(0, 0.5)))


def fewest_crossings(ax: Any, stars: list[list[Any]], slots: list[tuple[float, float]]) -> list[list[Any]]:
    """``stars`` ordered so that the lines from each to its slot, in order, cross each other least (on screen)."""
    def crossings(order: tuple[list[Any], ...]) -> int:
        ends = [ax.transData.transform([(g[0], g[1]), slot]) for g, slot in zip(order, slots)]
        return sum(_segments_cross(*a, *b) for i, a in enumerate(ends) for b in ends[i + 1:])

    return list(min(itertools.permutations(stars), key=crossings)) if len(stars) <= 7 else stars


def _segments_cross(p: Any, q: Any, r: Any, s: Any) -> bool:
    """True when segment pq crosses segment rs (strictly: touching ends do not count)."""
    def side(a: Any, b: Any, c: Any) -> float:
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    return side(p, q, r) * side(p, q, s) < 0 and side(r, s, p) * side(r, s, q) < 0


def same_numbers_merged(rows: list[list[Any]]) -> list[list[Any]]:
    """Rows whose cells after the first are equal, as one row whose first cell names them all (in order)."""
    merged: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        key = tuple(row[1:])
        if key in merged:
            merged[key][0] += f", {row[0]}"
        else:
            merged[key] = list(row)
    return list(merged.values())


def loaded_latencies(record: BytesInFlight, reads: int = 3, width: int = 16) -> list[tuple[float, float, float]]:
    """Along one curve: bytes in flight per SM, GB/s, and the latency (ns) Little's law implies for that rate."""
    return [(q, gbs, implied_latency_ns(q, record.sms, gbs * reads / (reads + 1)))
            for q, gbs in curve_points(record.probes, reads, width)]


def loaded_latency_line(record: BytesInFlight, reads: int = 3, width: int = 16) -> str:
    """One curve's loaded latency in a line: at its first and its last point, and where it is fastest."""
    points = loaded_latencies(record, reads, width)
    if not points:
        return f"{reads} read(s) : 1 write, {width}-byte probes: not measured"
    (q0, g0, l0), (q1, g1, l1) = points[0], points[-1]
    qb, gb, _ = max(points, key=lambda point: point[1])
    return (f"{reads} read{'s' if reads > 1 else ''} : 1 write, {width}-byte probes: implied latency {l0:,.0f} ns at "
            f"{_kib(q0)} KiB per SM ({g0:,.0f} GB/s), {l1:,.0f} ns at {_kib(q1)} KiB ({g1:,.0f} GB/s); "
            f"fastest {gb:,.0f} GB/s, at {_kib(qb)} KiB")


def same_in_flight_probe(record: BytesInFlight, k: Any) -> float | None:
    """GB/s of the resident probe with ``k``'s mix, width and bytes in flight, one access per thread; None if none ran."""
    probe = [p.gbs for p in record.probes if p.grid == "resident" and p.reads == k.reads and p.unroll == 1
             and p.width_bytes == k.width_bytes and p.bytes_in_flight_per_sm == k.bytes_in_flight_per_sm and p.gbs]
    return probe[0] if probe else None


def blocks_per_sm_table(record: BytesInFlight) -> str:
    """How the probes' grids landed: for each grid of m blocks per SM, the SMs used and the blocks each got."""
    rows = [[m, used, f"exactly {m}" if fewest == most == m else f"{fewest} to {most}"]
            for m, (fewest, most, used) in record.blocks_per_sm_seen.items()]
    return table(rows, ["blocks per SM launched", "SMs used", "blocks each SM got"], align="rrl")
