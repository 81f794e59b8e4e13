"""Notebook 07's figure and the benchmark's printed summary, from a :class:`~helpers.lessons.roofline.record.Roofline`."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from helpers.harness.tables import table
from helpers.plots import key_beside

from .record import Roofline

NEAR_BEST_PERCENT = 97.0  # "at the roofline": within 3 % of the best streaming kernel of the same mix


def plot_roofline(record: Roofline, n: int = 2**28) -> Any:
    """Bars: % of the best 3:1 streaming kernel for each variant and torch.compile at size ``n``."""
    row = record.runs[n]
    best = row.best_streaming_gbs()
    entries = [(name, e, "tab:blue") for name, e in row.variants.items()]
    entries += [(k, getattr(row, k), "tab:orange" if k == "torch_compile" else "tab:gray")
                for k in ("torch_compile", "stream3", "stream3_torch_compile") if getattr(row, k) is not None]
    shown = [(name, row.percent_of_best(e), color) for name, e, color in entries if row.percent_of_best(e) is not None]
    labels = [name for name, _, _ in shown]
    values = [v for _, v, _ in shown]
    colors = [c for _, _, c in shown]
    fig, ax = plt.subplots(figsize=(10, 3.8))
    ax.barh(labels[::-1], values[::-1], color=colors[::-1])
    ax.axvline(100, color="black", lw=1)
    ax.axvline(NEAR_BEST_PERCENT, color="tab:red", lw=1, ls="--")
    ax.set(xlabel=f"% of the best 3:1 streaming kernel ({best:,.0f} GB/s), n = {n:,}",
           xlim=(0, max(values + [100]) + 5),
           title="out = (a + b) * c / s: fused variants against the best streaming kernel and torch.compile")
    key = [Patch(color="tab:blue", label="Numba variants"), Patch(color="tab:orange", label="torch.compile"),
           Patch(color="tab:gray", label="3:1 streaming kernels"),
           Line2D([], [], color="black", lw=1, label="the best 3:1 measurement (100%)"),
           Line2D([], [], color="tab:red", lw=1, ls="--", label=f"{NEAR_BEST_PERCENT:.0f}%, the record's check")]
    key_beside(ax, key)
    fig.tight_layout()
    return fig


def summary(record: Roofline) -> str:
    """Per size: the copy, the best 3:1 streaming kernel, and every kernel's time, rate, bits and registers."""
    parts = []
    for n, row in record.runs.items():
        parts.append(f"n = {n:,}: copy {row.copy.gbs:.0f} GB/s, best 3:1 streaming {row.best_streaming_gbs() or 0:.0f} GB/s")
        entries = [*row.variants.items(), ("stream3", row.stream3), ("torch_compile", row.torch_compile)]
        parts.append(table([[name, f"{e.median_ms:.3f} ms", f"{e.gbs:.0f} GB/s", e.bitwise_equal, e.registers]
                            if e.median_ms is not None else [name, e.error, None, None, None]
                            for name, e in entries if e is not None],
                           ["kernel", "median", "rate", "bitwise", "registers"]))
    return "\n".join(parts)
