"""What notebook 09 shows of a :class:`~helpers.lessons.launches.record.LaunchesRun`: its tables, its fit and its figures."""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from helpers.harness.tables import power_label
from helpers.harness.tables import table as text_table
from helpers.timing import format_ms

from .record import (DIRECT_FUSED, DIRECT_THREE, GRAPH_BEST, GRAPH_FUSED, GRAPH_THREE, NUMBA_VARIANTS, RO, RO_STATIC,
                     ArgumentCost, LaunchesRun)


def fit_per_argument(costs: Sequence[ArgumentCost], which: str = "lazy") -> tuple[float, float]:
    """Least-squares line through median host µs against arrays: (µs at 0 arrays, µs per array)."""
    x = np.array([c.arrays for c in costs], dtype=float)
    y = np.array([getattr(c, which) for c in costs])
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


COLORS = {DIRECT_THREE: "#c44e52", DIRECT_FUSED: "#4c72b0", GRAPH_THREE: "#e8a09a", GRAPH_FUSED: "#1f3f7a",
          GRAPH_BEST: "#000000",
          "cupy ElementwiseKernel": "#55a868", "torch eager": "#dd8452", "torch.compile": "#8172b3",
          RO: "#3b2a80", RO_STATIC: "#c44e52"}


def plot_argument_costs(record: LaunchesRun) -> Any:
    """Host µs per launch against array arguments: lazy, explicit signature, graph replay."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    costs = record.argument_costs
    if not costs:
        ax.text(0.5, 0.5, "not measured here (needs a GPU)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    x = [c.arrays for c in costs]
    for which, label, style in (("lazy", "@cuda.jit (lazy)", "o-"), ("explicit", "explicit signature", "s--"),
                                ("graph", "graph of that one launch, replayed", "^-")):
        _ = ax.plot(x, [getattr(c, which) for c in costs], style, label=label)
    ax.set(xlabel="array arguments", ylabel="host time per launch (µs)", ylim=(0, None))
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"one launch at n = {record.settings.argument_n}")
    fig.tight_layout()
    return fig


def plot_two_by_two(record: LaunchesRun, mode: str = "loop", labels: Sequence[str] | None = None) -> Any:
    """Time per call against n for every timed variant (log-log)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    labels = list(labels or record.measured())
    if not labels:
        ax.text(0.5, 0.5, "no timings here (needs a GPU)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    for label in labels:
        points = [(t.n, getattr(t, mode) * 1e3) for t in record.timings if t.variant == label]
        if points:
            xs, ys = zip(*sorted(points))
            style = "-" if label in NUMBA_VARIANTS else ":"
            width = 2.4 if label in NUMBA_VARIANTS else 1.4
            _ = ax.plot(xs, ys, style, marker="o", markersize=3, lw=width, label=label, color=COLORS.get(label))
    ax.set_xscale("log", base=2)
    ax.set(yscale="log", xlabel="n (float32 elements)",
           ylabel="time per call (µs)" + (", launch included" if mode == "loop" else ", GPU only"))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def table(record: LaunchesRun, sizes: Sequence[int] = (2**10, 2**20, 2**28), mode: str = "loop") -> str:
    """Median time per call of every timed variant at a few sizes."""
    labels = record.measured()
    if not labels:
        return "no timings: " + record.note
    return text_table([[label] + [None if (m := record.median(label, n, mode)) is None else format_ms(m) for n in sizes]
                  for label in labels], ["variant"] + [power_label(n) for n in sizes])


def argument_table(record: LaunchesRun) -> str:
    """Host µs per launch against array arguments: lazy, explicit signature, graph replay."""
    if not record.argument_costs:
        return "host time per launch: not measured (needs a GPU)"
    return text_table([[c.arrays, f"{c.lazy:.1f} µs", f"{c.explicit:.1f} µs", f"{c.graph:.1f} µs"] for c in record.argument_costs],
                 ["arrays", "lazy @cuda.jit", "explicit signature", "graph replay"], align="rrrr")
