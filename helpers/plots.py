"""Plots: trips and bytes against measured runtime."""

from __future__ import annotations

from typing import Sequence

import matplotlib

matplotlib.use(matplotlib.get_backend())  # keep the notebook's inline backend; Agg elsewhere
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .ledger import Ledger
from .timing import Timing


def plot_trips_vs_runtime(entries: Sequence[tuple[Ledger, Timing | None]], *, title: str | None = None) -> Figure:
    """Bytes per element (with trips in the labels) against median runtime, one point per pipeline.

    Where there is no timing (the simulator) the runtime panel says so instead of
    inventing a number, and only the counted traffic is drawn.
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

    timed = [(ledger, timing) for ledger, timing in entries if timing is not None]
    if timed:
        for ledger, timing in timed:
            runtime.scatter(ledger.bytes_per_element(), timing.median_ms, s=60, zorder=3)
            runtime.annotate(f"  {ledger.name} ({ledger.trips} trips)", (ledger.bytes_per_element(), timing.median_ms))
        runtime.set_xlabel("bytes moved per element")
        runtime.set_ylabel("median runtime (ms)")
        runtime.set_xlim(0, max(per_element) * 1.6)
        runtime.set_ylim(0, max(t.median_ms for _, t in timed) * 1.25)
        runtime.grid(alpha=0.3)
    else:
        runtime.text(0.5, 0.5, "no runtime in the simulator:\nrun on a GPU to measure", ha="center", va="center")
        runtime.set_axis_off()
    fig.suptitle(title or "trips to memory against runtime")
    fig.tight_layout()
    return fig
