"""Plots: trips and bytes against measured runtime."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import Patch
from matplotlib.figure import Figure

from .ledger import Ledger
from .timing import Timing


def _median_ms(runtime: Timing | float) -> float:
    """A runtime's median in milliseconds: a :class:`Timing`'s own, or a committed median as it is."""
    return runtime.median_ms if isinstance(runtime, Timing) else float(runtime)


def plot_trips_vs_runtime(entries: Sequence[tuple[Ledger, Timing | float | None]], *, title: str | None = None,
                          runtime_source: str | None = None) -> Figure:
    """Bytes per element (with trips in the labels) against median runtime, one point per pipeline.

    A runtime is a :class:`Timing` measured now, or a median in milliseconds read from a committed run, whose
    origin ``runtime_source`` names above the runtime panel.  Where there is no runtime at all (the simulator,
    with nothing committed) the panel says so instead of inventing a number, and only the counted traffic is drawn.
    """
    if not entries:
        raise ValueError("nothing to plot: pass (ledger, timing) pairs")
    fig, (traffic, runtime) = plt.subplots(1, 2, figsize=(9, 3.4))
    names = [ledger.name for ledger, _ in entries]
    per_element = [ledger.bytes_per_element() for ledger, _ in entries]
    bars = traffic.barh(names, per_element, color="#4c72b0")
    for bar, (ledger, _) in zip(bars, entries):
        traffic.annotate(f" {ledger.trips} trips", (bar.get_width(), bar.get_y() + bar.get_height() / 2), va="center")
    traffic.set_xlabel("bytes moved per element")
    traffic.set_xlim(0, max(per_element) * 1.35)
    traffic.invert_yaxis()

    timed = [(ledger, _median_ms(timing)) for ledger, timing in entries if timing is not None]
    if timed:
        labelled: list[tuple[float, float]] = []
        medians = [median for _, median in timed]
        for ledger, median in timed:
            point = (ledger.bytes_per_element(), median)
            runtime.scatter(*point, s=60, zorder=3)
            # points that (nearly) coincide get their labels stacked, not drawn over each other
            below = sum(1 for x, y in labelled if x == point[0] and abs(y - point[1]) <= 0.08 * max(y, point[1]))
            labelled.append(point)
            runtime.annotate(f"{ledger.name} ({ledger.trips} trips)", point, xytext=(8, -13 * below),
                             textcoords="offset points", va="center")
        runtime.set_xlabel("bytes moved per element")
        runtime.set_ylabel("median runtime (ms)")
        runtime.set_xlim(0, max(per_element) * 2.0)  # room for the longest label right of its point
        runtime.set_ylim(0, max(medians) * 1.25)
        runtime.grid(alpha=0.3)
        if runtime_source:
            runtime.set_title(runtime_source, fontsize=8)
    else:
        runtime.text(0.5, 0.5, "no runtime in the simulator:\nrun on a GPU to measure", ha="center", va="center")
        runtime.set_axis_off()
    fig.suptitle(title or "trips to memory against runtime")
    fig.tight_layout()
    return fig


def key_beside(ax, handles: Sequence) -> None:
    """A legend of ``handles`` to the right of the axes, outside them, so that it covers no data."""
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)


def plot_ledger(ledger: Ledger, *, title: str | None = None) -> Figure:
    """Bytes per element each launch reads and writes, array by array.

    Arrays that one launch writes and a later one reads back (the intermediates)
    are drawn in orange: they are the traffic fusion removes.
    """
    if not ledger.launches:
        raise ValueError(f"the ledger '{ledger.name}' recorded no launches")
    intermediates = set(ledger.round_trips())
    n = ledger.elements
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.7 * len(ledger.launches)))
    labels = []
    for row, launch in enumerate(ledger.launches):
        left = 0.0
        for direction, attribute in (("read", "bytes_read"), ("write", "bytes_written")):
            for array in launch.arrays:
                width = getattr(array, attribute) / n
                if not width:
                    continue
                colour = "#dd8452" if array.name in intermediates else "#4c72b0"
                ax.barh(row, width, left=left, color=colour, edgecolor="white", hatch="" if direction == "read" else "//")
                ax.text(left + width / 2, row, f"{direction} {array.name}", ha="center", va="center", fontsize=8, color="white")
                left += width
        labels.append(f"{launch.kernel}\n({launch.trips} trips)")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("bytes per element")
    ax.set_title(title or f"{ledger.name}: {ledger.trips} trips, {ledger.bytes_per_element():g} bytes per element")
    key = [Patch(facecolor="#4c72b0", label="an input or the result"),
           Patch(facecolor="#dd8452", label="an intermediate that round-trips"),
           Patch(facecolor="white", edgecolor="grey", hatch="//", label="written (plain: read)")]
    key_beside(ax, key)
    fig.tight_layout()
    return fig


def plot_arithmetic_sweep(fmas: Sequence[int], measured_ms: Sequence[float] | None, memory_ms: float | None,
                          compute_ms_per_fma: float | None, knee: float | None) -> Figure:
    """Runtime against FMAs per element: flat while memory-bound, rising past the compute knee.

    ``memory_ms`` is the memory floor (bytes over the bound) and
    ``compute_ms_per_fma`` the arithmetic floor per FMA per element (at peak); the
    floor drawn is the larger of the two (the roofline).  Without measurements
    (the simulator) the panel says so.
    """
    fig, ax = plt.subplots(figsize=(7, 3.6))
    if measured_ms is None or memory_ms is None or compute_ms_per_fma is None:
        ax.text(0.5, 0.5, "no runtime in the simulator:\nrun on a GPU to measure", ha="center", va="center")
        ax.set_axis_off()
        return fig
    predicted = [max(memory_ms, k * compute_ms_per_fma) for k in fmas]
    ax.plot(fmas, measured_ms, "o-", label="measured (median)")
    ax.plot(fmas, predicted, "--", color="grey", label="floor: max(bytes / bandwidth, FLOPs / peak)")
    if knee is not None:
        ax.axvline(knee, color="#dd8452", lw=1)
        ax.annotate(f"predicted knee ~{knee:.0f} FMAs ", (knee, max(measured_ms)), color="#dd8452", ha="right", va="top")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("FMAs per element (same bytes: read 4, write 4)")
    ax.set_ylabel("runtime (ms)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=8)  # below the axes: over no curve
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig
