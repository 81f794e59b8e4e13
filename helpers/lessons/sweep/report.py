"""What notebook 05 shows of a size sweep: its tables and figures (a simulated sweep's say in words that it has
no times).  Regime bands are computed from the data (:func:`helpers.lessons.sweep.analysis.regimes_of`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use(matplotlib.get_backend())  # keep a notebook's inline backend; Agg in scripts
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from helpers.device import datasheet_bandwidth_gbs
from helpers.harness.tables import table
from helpers.timing import format_ms

from . import analysis as sa
from .record import LaunchOverhead, Sweep

PNG_NAMES = {"runtime": "sweep_runtime.png", "bandwidth": "sweep_bandwidth.png", "headline": "headline.png",
             "overhead": "launch_overhead.png"}
COLORS = {"numba three kernels": "#c44e52", "numba fused": "#4c72b0", "numba fused (best)": "#17becf",
          "numba three kernels + graph": "#e8a09a", "numba fused + graph": "#9ecae1", "numpy (CPU)": "#8c8c8c",
          "cupy ElementwiseKernel": "#55a868", "torch eager": "#dd8452", "torch.compile": "#8172b3",
          "device copy": "#222222"}
REGIME_COLORS = {sa.LAUNCH_BOUND: "#f2d7d5", sa.L2_RESIDENT: "#d5e8d4", sa.DRAM_BOUND: "#dae8fc", sa.TRANSITION: "#ffffff"}
PIPELINES = ("numba three kernels", "numba fused")


def _measured(sweep: Sweep) -> list[str]:
    return [label for label, info in sweep.implementations.items()
            if info.status == "ok" and sa.series(sweep, label, "loop")[0].size]


def _caption(sweep: Sweep) -> str:
    return sweep.provenance.describe() if sweep.provenance else ""


def _no_timings(title: str, sweep: Sweep) -> Figure:
    fig, ax = plt.subplots(figsize=(7, 2.6))
    checked = sorted({v.n for v in sweep.verification if v.passed})
    ax.text(0.5, 0.5, f"simulated sweep: no timings\n(correctness checked at n = {', '.join(map(str, checked)) or '-'})\n"
            "run `python -m helpers.lessons.sweep` on a GPU to measure", ha="center", va="center")
    ax.set_axis_off()
    ax.set_title(title)
    return fig


def _finish(fig: Figure, ax: Axes, heading: str, sweep: Sweep, **legend: Any) -> Figure:
    """Legend (``legend`` are its options), a title with the device and date, tight layout."""
    ax.legend(fontsize=legend.pop("fontsize", 8), **legend)
    ax.set_title(f"{heading}\n{_caption(sweep)}", fontsize=9)
    fig.tight_layout()
    return fig


def _reference_line(ax: Axes, y: float, text: str, x: float = 0.99, **style: Any) -> None:
    ax.axhline(y, lw=0.8, **style)
    ax.annotate(text, (x, y), xycoords=("axes fraction", "data"), ha="right" if x > 0.5 else "left", va="bottom", fontsize=8)


def _log2_axis(ax: Axes) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (float32 elements per array)")
    ax.grid(alpha=0.3, which="both")


def shade_regimes(ax: Axes, sweep: Sweep, label: str, mode: str, hatch_guesses: bool = False) -> list[tuple[str, int, int]]:
    """Shade the regimes that the data of ``label`` show (L2-resident only in GPU time); returns the spans found.

    In the Python loop's view an "L2-resident" size is an outlier's doing (there is no flushed run to tell): it is
    left white, or hatched and named in the key when ``hatch_guesses``."""
    sizes, _ = sa.series(sweep, label, mode)
    labels = sa.regimes_of(sweep, label, mode)
    if not labels:
        return []
    spans = sa.regime_spans(sizes, labels)
    seen = set()
    for regime, first, last in spans:
        if regime == sa.L2_RESIDENT and mode == "loop" and hatch_guesses:
            ax.axvspan(first / 2**0.5, last * 2**0.5, facecolor="none", edgecolor="#bbbbbb", hatch="//", lw=0,
                       label=None if "outlier" in seen else "L2-resident only by an outlier")
            seen.add("outlier")
        if regime == sa.TRANSITION or (regime == sa.L2_RESIDENT and mode == "loop"):
            continue  # the loop view has no flushed run: an outlier there passes for an L2 hit
        ax.axvspan(first / 2**0.5, last * 2**0.5, color=REGIME_COLORS[regime], alpha=0.6, lw=0,
                   label=None if regime in seen else f"{regime} ({label})")
        seen.add(regime)
    return spans


def _l2_line(ax: Axes, sweep: Sweep, label: str = "numba fused") -> None:
    l2 = sweep.settings.l2_bytes
    if l2 and label in sweep.implementations:
        n_fit = l2 / sweep.implementations[label].working_set_per_element
        ax.axvline(n_fit, color="#555555", ls=":", lw=1)
        ax.annotate(" working set\n = L2 (fused)", (n_fit, 0.02), xycoords=("data", "axes fraction"), va="bottom", fontsize=7)


def _traffic_note(sweep: Sweep, pipeline: str) -> str:
    counted = sweep.pipelines[pipeline]
    return (f"{counted.launches} launch{'es' if counted.launches != 1 else ''}, {counted.trips} trips, "
            f"{counted.bytes_per_element:g} B/elem")


def draw_runtime(ax: Axes, sweep: Sweep, mode: str = "loop", labels: Sequence[str] | None = None,
                 shade: str | None = "numba fused", cold: bool = False, hatch_guesses: bool = False) -> None:
    """Median time against n on log-log axes, the two Numba pipelines annotated with their traffic."""
    labels = [l for l in (labels or _measured(sweep)) if l in _measured(sweep)]
    if mode != "loop":  # GPU-time panels: the host's NumPy has no GPU time
        labels = [l for l in labels if sweep.implementations[l].device == "gpu"]
    if shade in labels:
        shade_regimes(ax, sweep, shade, mode, hatch_guesses)
    for label in labels:
        sizes, times = sa.series(sweep, label, mode)
        width = 2.4 if label in PIPELINES else 1.3
        _ = ax.plot(sizes, times, "o-", ms=3, lw=width, color=COLORS.get(label), label=label)
        if cold and sweep.implementations[label].device == "gpu":
            cs, ct = sa.series(sweep, label, "gpu_cold")
            _ = ax.plot(cs, ct, "--", lw=1, color=COLORS.get(label))
        if label in PIPELINES and sizes.size:
            pipeline = "three kernels" if label == PIPELINES[0] else "fused"
            ax.annotate(_traffic_note(sweep, pipeline), (sizes[-1], times[-1]), xytext=(-10, 0),
                        textcoords="offset points", ha="right", va="center", fontsize=8, color=COLORS.get(label))
    _l2_line(ax, sweep)
    _log2_axis(ax)
    ax.set(yscale="log", ylabel="median time (ms)")


def plot_sweep_runtime(sweep: Sweep) -> Figure:
    """Two panels: what a Python loop sees (launch overhead included), and GPU time alone (warm and cold L2)."""
    title = "out = (a + b) * c / s: runtime against n"
    if not sa.has_timings(sweep):
        return _no_timings(title, sweep)
    fig, (loop, gpu) = plt.subplots(1, 2, figsize=(13, 5.6), sharey=True)
    draw_runtime(loop, sweep, "loop", hatch_guesses=True)
    loop.set_title("a Python loop: events around each call (launch cost included)", fontsize=9)
    draw_runtime(gpu, sweep, "gpu", cold=True)
    gpu.set_title("GPU time only: solid = L2 warm, dashed = L2 flushed", fontsize=9)
    between = Patch(facecolor="white", edgecolor="#cccccc", label="in between (unshaded)")
    for ax in (loop, gpu):  # each panel keys its own regimes, top left, above the curves
        bands = [h for h, l in zip(*ax.get_legend_handles_labels()) if l.endswith(("(numba fused)", "outlier"))]
        ax.legend(handles=bands + [between], fontsize=7, loc="upper left")
    lines = [(h, l) for h, l in zip(*loop.get_legend_handles_labels()) if l in sweep.implementations]
    fig.legend(*zip(*lines), fontsize=8, loc="lower center", ncol=5, frameon=False)  # one key for both panels
    fig.suptitle(f"{title}\n{_caption(sweep)}", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def plot_bandwidth(sweep: Sweep, mode: str = "gpu_cold", labels: Sequence[str] | None = None) -> Figure:
    """Achieved GB/s (counted bytes over median time) of the GPU implementations, against the datasheet's bound."""
    title = "achieved bandwidth against n"
    if not sa.has_timings(sweep):
        return _no_timings(title, sweep)
    fig, ax = plt.subplots(figsize=(8, 4.6))
    bound = datasheet_bandwidth_gbs(sweep.provenance.device) if sweep.provenance else None
    on_gpu = [label for label in _measured(sweep) if sweep.implementations[label].device == "gpu"]  # like for like
    for label in labels or on_gpu:
        sizes, gbs = sa.bandwidth_gbs(sweep, label, mode)
        _ = ax.plot(sizes, gbs, "o-", ms=3, lw=2.4 if label in PIPELINES else 1.3, color=COLORS.get(label), label=label,
                    zorder=3 if label == "numba fused (best)" else 2)  # above torch.compile, which it ties
    _log2_axis(ax)
    ax.set_ylabel("GB/s (counted bytes / median time)")
    if bound:
        _reference_line(ax, bound, f"datasheet bound {bound:,.0f} GB/s", x=0.01, color="black", ls="--")
        share = ax.secondary_yaxis("right", functions=(lambda g: 100 * g / bound, lambda p: p * bound / 100))
        share.set_ylabel("% of the datasheet bound")
    _l2_line(ax, sweep)
    return _finish(fig, ax, f"{title} ({sa.MODE_NAMES.get(mode, mode)})", sweep, fontsize=7, loc="center left")


def plot_speedup(sweep: Sweep) -> Figure:
    """time(three kernels) / time(fused) against n, beside the launch ratio and the bytes ratio."""
    title = "how much the fusion buys at each size"
    if not sa.has_timings(sweep):
        return _no_timings(title, sweep)
    three, fused = (sweep.pipelines[p] for p in ("three kernels", "fused"))
    fig, ax = plt.subplots(figsize=(8, 4))
    for mode, style in (("loop", "o-"), ("gpu", "s--"), ("gpu_cold", "^:")):
        sizes, ratio = sa.speedup(sweep, *PIPELINES, mode=mode)
        _ = ax.plot(sizes, ratio, style, ms=3, label=sa.MODE_NAMES[mode])
    bytes_ratio = three.bytes_per_element / fused.bytes_per_element
    _reference_line(ax, bytes_ratio, f"bytes ratio {bytes_ratio:g}", color="black")
    launch_ratio = three.launches / fused.launches
    _reference_line(ax, launch_ratio, f"launch ratio {launch_ratio:g}", color="grey", ls="--")
    _log2_axis(ax)
    ax.set(ylabel="three kernels / fused (time)", ylim=(0, max(launch_ratio, bytes_ratio) * 1.3))
    return _finish(fig, ax, title, sweep, title="timing mode", title_fontsize=8)


def plot_headline(sweep: Sweep) -> Figure:
    """The README's figure: three kernels, fused, fused + graph and torch.compile against n."""
    title = "three kernels or one: runtime against n"
    if not sa.has_timings(sweep):
        return _no_timings(title, sweep)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    labels = [l for l in (*PIPELINES, "numba fused + graph", "torch.compile") if l in _measured(sweep)]
    draw_runtime(ax, sweep, "loop", labels=labels)
    sizes, ratio = sa.speedup(sweep, *PIPELINES, mode="loop")
    if sizes.size:
        ax.annotate(f"fused is {ratio[-1]:.2f}x faster at n = {sa.power_label(sizes[-1])}", (0.02, 0.9),
                    xycoords="axes fraction", fontsize=9, weight="bold")
    return _finish(fig, ax, title, sweep, loc="upper left", bbox_to_anchor=(0, 0.88))  # above the curves


def plot_launch_overhead(overhead: LaunchOverhead) -> Figure:
    """Host microseconds per launch, for each launcher measured."""
    rows = overhead.launchers
    if not rows:
        fig, ax = plt.subplots(figsize=(7, 2))
        ax.text(0.5, 0.5, overhead.note, ha="center", va="center")
        ax.set_axis_off()
        return fig
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.4))
    names = list(rows)
    y = np.arange(len(names))
    _ = ax.barh(y - 0.2, [rows[k].issue_us for k in names], height=0.4, label="issue (host, per launch in a burst)")
    _ = ax.barh(y + 0.2, [rows[k].launch_and_wait_us for k in names], height=0.4, label="one launch + synchronize")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("µs per launch (host wall clock, n = %d)" % overhead.n)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


def save_all(sweep: Sweep, folder: Path, overhead: LaunchOverhead | None = None) -> list[Path]:
    """Write the sweep's PNGs into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    figures = {"runtime": plot_sweep_runtime(sweep), "bandwidth": plot_bandwidth(sweep), "headline": plot_headline(sweep)}
    if overhead is not None:
        figures["overhead"] = plot_launch_overhead(overhead)
    paths = []
    for key, figure in figures.items():
        path = folder / PNG_NAMES[key]
        figure.savefig(path, dpi=130)
        plt.close(figure)
        paths.append(path)
    return paths


def summary_table(sweep: Sweep, sizes: Sequence[int] = (2**20, 2**24, 2**28), mode: str = "loop") -> str:
    """Median times at a few sizes for every implementation that ran."""
    if not sa.has_timings(sweep):
        return "no timings: " + sweep.note
    labels = [label for label, info in sweep.implementations.items() if info.status == "ok"]
    return table([[label] + [None if (t := sa.median_at(sweep, label, n, mode)) is None else format_ms(t) for n in sizes]
                  for label in labels], ["implementation"] + [sa.power_label(n) for n in sizes])


def overhead_table(overhead: LaunchOverhead) -> str:
    """Host time per launch: issue cost in a burst, and one launch followed by a wait."""
    if not overhead.launchers:
        return overhead.note
    return table([[label, f"{row.issue_us:.1f} µs", f"{row.launch_and_wait_us:.1f} µs"]
                  for label, row in overhead.launchers.items()], ["launcher", "issue/launch", "launch+wait"])
