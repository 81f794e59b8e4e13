"""What notebook 09 shows of a :class:`~helpers.lessons.launches.record.LaunchesRun`: its tables, its fit, its figures,
and where a peer beats "fused + graph" by more than a tie."""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from helpers.harness.tables import power_label
from helpers.harness.tables import table as text_table
from helpers.timing import Timing, format_ms

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
          RO: "#da8bc3", RO_STATIC: "#937860"}


TWO_BY_TWO = (DIRECT_THREE, DIRECT_FUSED, GRAPH_THREE, GRAPH_FUSED)
FEATURED = ("torch.compile", GRAPH_BEST)
PEER_STYLES = [(":", "s"), ("--", "^"), (":", "v"), ("--", "D"), (":", "x"), ("--", "+"), ("-.", "*"), ("-.", "o")]
"""Line style and marker of each peer in the 2x2 figure: thin, in its own colour (grey if it has none)."""


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
    """Time per call against n for every timed variant (log-log): the 2x2 bold, the peers thin, and
    :data:`FEATURED` between the two; each in its own colour."""
    fig, ax = plt.subplots(figsize=(10, 4.4), layout="constrained")
    labels = list(labels or record.measured())
    if not labels:
        ax.text(0.5, 0.5, "no timings here (needs a GPU)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    peers = iter(PEER_STYLES)
    for label in sorted(labels, key=lambda label: label not in TWO_BY_TWO):  # the 2x2 first in the legend
        points = [(t.n, getattr(t, mode) * 1e3) for t in record.timings if t.variant == label]
        if points:
            xs, ys = zip(*sorted(points))
            style = dict(ls="-", marker="o", markersize=3.5, lw=2.6, color=COLORS.get(label), zorder=3) \
                if label in TWO_BY_TWO else dict(zip(("ls", "marker"), next(peers)), markersize=3, lw=1,
                                                  color=COLORS.get(label, "0.55"))
            if label in FEATURED:  # the peers the lesson compares with the 2x2: their own colour, between the two
                style.update(lw=1.8, markersize=3.5, color=COLORS[label], zorder=2)
            _ = ax.plot(xs, ys, label=label, **style)
    ax.set_xscale("log", base=2)
    ax.set(yscale="log", xlabel="n (float32 elements)",
           ylabel="time per call (µs)" + (", launch included" if mode == "loop" else ", GPU only"))
    ax.grid(alpha=0.3, which="both")
    fig.legend(loc="outside right center", fontsize=8)  # beside the curves, not over them
    return fig


def table(record: LaunchesRun, sizes: Sequence[int] = (2**10, 2**20, 2**28), mode: str = "loop",
          labels: Sequence[str] | None = None) -> str:
    """Median time per call of every timed variant (or of ``labels``) at a few sizes."""
    labels = [label for label in record.measured() if labels is None or label in labels]
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


# --- where a peer beats fused + graph, read with a tolerance ------------------------------------

TIE_SHARE = 0.03
"""A difference of at most 3% of the slower time, or within the repeats' interquartile range, is a tie."""


def versus(record: LaunchesRun, mine: str, peer: str, n: int, mode: str = "loop") -> str | None:
    """``"faster"``, ``"tie"`` or ``"slower"``: ``peer`` against ``mine`` at ``n``; None where either is not timed.

    ``peer`` is faster only by more than :data:`TIE_SHARE` of ``mine``'s median and more than the larger
    interquartile range of the two; less than that either way is a tie.
    """
    a, b = record.timed(mine, n), record.timed(peer, n)
    if a is None or b is None:
        return None
    samples = {"loop": lambda t: t.loop_ms, "gpu": lambda t: t.gpu_ms}[mode]
    slow, fast = (Timing(t.variant, samples(t)) for t in (a, b))
    margin = max(TIE_SHARE * slow.median_ms, slow.spread_ms, fast.spread_ms)
    difference = slow.median_ms - fast.median_ms
    return "tie" if abs(difference) <= margin else "faster" if difference > 0 else "slower"


def peers_against(record: LaunchesRun, mine: str = GRAPH_FUSED) -> list[str]:
    """One line per variant that beats or ties with ``mine`` at some size: where, and by how much, also in GPU time."""
    lines = []
    for peer in (label for label in record.measured() if label != mine):
        verdicts = {n: versus(record, mine, peer, n) for n in record.sizes()}
        wins = [f"{power_label(n)} ({record.median(mine, n) / record.median(peer, n):.2f}x; GPU time "
                f"{record.median(mine, n, 'gpu') / record.median(peer, n, 'gpu'):.2f}x)"
                for n, v in verdicts.items() if v == "faster"]
        ties = [power_label(n) for n, v in verdicts.items() if v == "tie"]
        parts = ([f"faster at {', '.join(wins)}"] if wins else []) + ([f"a tie at {', '.join(ties)}"] if ties else [])
        if parts:
            lines.append(f"{peer} against {mine.removeprefix('numba ')}: " + "; ".join(parts))
    return lines
