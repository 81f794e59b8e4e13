"""What notebook 04 shows of the hardware count: the three counts side by side, the ratio plot, the corpus table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import matplotlib.pyplot as plt

from helpers.counting import Comparison
from helpers.harness.tables import power_label, table
from helpers.lessons.dram.record import NcuCorpus, NcuDram
from helpers.results import ResultError, load

GPU_STEPS = {NcuDram: "04_dram", NcuCorpus: "04_dram_corpus"}


def load_results(cls: type[NcuDram] | type[NcuCorpus] = NcuDram) -> NcuDram | NcuCorpus | None:
    """The committed H200 measurement (``NcuDram`` or ``NcuCorpus``), or ``None``, with a printed note, when there is none yet."""
    try:
        return load(cls)
    except ResultError as exc:
        print(f"note: {exc}. The hardware count is skipped here; it is measured by scripts/gpu/{GPU_STEPS[cls]}.sh.")
        return None


@dataclass
class PipelineTotal:
    """One pipeline at one size: the ledger's bytes and ncu's DRAM bytes, summed over its launches."""

    n: int
    pipeline: str  # "three kernels" or "fused"
    ledger: int = 0
    ncu_read: float = 0.0
    ncu_written: float = 0.0

    @property
    def ncu(self) -> float:
        """ncu's DRAM bytes, read + written."""
        return self.ncu_read + self.ncu_written


def pipeline_totals(results: NcuDram, mode: str = "all") -> list[PipelineTotal]:
    """Per size and pipeline ("three kernels", "fused"): ledger bytes and ncu DRAM bytes summed over launches."""
    measured = results.modes.get(mode)
    totals: dict[tuple[int, str], PipelineTotal] = {}
    for r in measured.launches if measured else []:
        pipeline = "fused" if r.kernel == "fused_kernel" else "three kernels"
        t = totals.setdefault((r.n, pipeline), PipelineTotal(r.n, pipeline))
        t.ledger += r.ledger_bytes_read + r.ledger_bytes_written
        t.ncu_read += r.ncu_dram_bytes_read
        t.ncu_written += r.ncu_dram_bytes_written
    return [totals[k] for k in sorted(totals)]


def plot_dram_against_ledger(results: NcuDram) -> Any:
    """DRAM bytes measured by ncu over bytes counted by the ledger, against array size, per pipeline and cache policy."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for mode, style in (("all", "-"), ("none", "--")):
        for pipeline, marker in (("three kernels", "o"), ("fused", "s")):
            rows = [t for t in pipeline_totals(results, mode) if t.pipeline == pipeline]
            if rows:
                x = [t.n * 4 / 1e6 for t in rows]
                y = [t.ncu / t.ledger for t in rows]
                label = f"{pipeline}, L2 {'flushed before each kernel' if mode == 'all' else 'kept between kernels'}"
                _ = ax.plot(x, y, style, marker=marker, label=label)
    if results.l2_cache_bytes:
        _ = ax.axvline(results.l2_cache_bytes / 1e6, color="grey", lw=0.8,
                       label=f"one array as large as the L2 ({results.l2_cache_bytes / 2**20:.0f} MiB)")
    _ = ax.axhline(1.0, color="black", lw=0.8, label="ncu's bytes = the ledger's")
    ax.set(xscale="log", ylim=(0, 1.2), xlabel="one array (MB)", ylabel="ncu DRAM bytes / ledger bytes")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def three_way_table(comparisons: Sequence[Comparison], n_small: int, results: NcuDram,
                    sizes: Sequence[int] | None = None) -> str:
    """The three counts side by side, per pipeline, in MB, at the sizes ncu measured.

    * PTX: the ledger's count on the GPU at that size (from the compiled code);
    * simulator: bytes per element counted at ``n_small``, times n;
    * ncu: DRAM bytes, with L2 flushed before each kernel and with L2 kept.
    """
    def per_element(fused: bool) -> float:
        return sum(c.simulated.bytes_read + c.simulated.bytes_written for c in comparisons
                   if (c.kernel == "fused_kernel") == fused) / n_small

    simulated = {"three kernels": per_element(False), "fused": per_element(True)}
    kept = {(t.n, t.pipeline): t for t in pipeline_totals(results, "none")}
    rows = []
    for t in pipeline_totals(results, "all"):
        if sizes is not None and t.n not in sizes:
            continue
        k = kept.get((t.n, t.pipeline))
        rows.append([power_label(t.n), t.pipeline, f"{t.ledger / 1e6:.1f}",
                     f"{simulated[t.pipeline] * t.n / 1e6:.1f}", f"{t.ncu / 1e6:.1f}",
                     f"{k.ncu / 1e6:.1f}" if k else "-"])
    return table(rows, ["n", "pipeline", "PTX MB", "simulator MB", "ncu MB (flushed)", "ncu MB (L2 kept)"],
                 align="rrrrrr")


def corpus_table(record: NcuCorpus) -> str:
    """The ledger's bytes beside ncu's DRAM bytes, in MB, one row per launch."""
    if record.error:
        return f"no ncu measurement: {record.error}"
    rows = []
    for r in record.launches:
        measured = (r.ncu_dram_bytes_read + r.ncu_dram_bytes_written) / 1e6
        if r.uncounted is None:
            model = (r.ledger_bytes_read + r.ledger_bytes_written) / 1e6
            rows.append([r.shape, r.kernel, f"{model:.1f}", f"{measured:.1f}",
                         f"{r.ratio:.3f}" if r.ratio is not None else "-"])
        else:
            rows.append([r.shape, r.kernel, "not counted", f"{measured:.1f}", "-"])
    return table(rows, ["shape", "kernel", "ledger MB", "ncu MB", "ncu / ledger"], align="lllll")
