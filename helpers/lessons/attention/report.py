"""What notebooks 12 and 13 show of the attention measurements: the tables, the claims, the figures."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from helpers.harness.tables import table
from helpers.lessons.softmax.report import best, committed_record, measurement_table, median, save_figure

from .kernels import attention_flops
from .record import AttentionBench, AttentionDram, AttentionRow


def committed() -> AttentionBench | None:
    """The committed H200 attention record (notebook 12), or None."""
    return committed_record(AttentionBench)


def flops_of(row: AttentionRow, name: str) -> float:
    """The multiply-adds an implementation really computes, two flops each (:func:`attention_flops`): for a causal
    one (its name says "causal") only the pairs with key <= query."""
    return float(attention_flops(row.batch * row.heads, row.length, row.head_dim, "causal" in name))


def attention_table(record: AttentionBench) -> str:
    """Time and TFLOP/s (the flops each computes: :func:`flops_of`) per implementation and length."""
    return measurement_table(record.rows, ("L", "r", lambda row: row.length),
                             ("TFLOP/s", lambda row, m: f"{flops_of(row, m.name) / m.median_ms / 1e9:.1f}"), "error",
                             digits=3)


def attention_claims(record: AttentionBench, ncu_record: AttentionDram | None = None) -> list[str]:
    """The claims about the fused attention kernel, each answered from the records."""
    claims = []
    for row in record.rows:
        fused, unfused = best(row, "numba fused q"), best(row, "numba unfused (")  # FP32, S and P in memory
        naive_ms = median(row, "torch naive fp32 (TF32 off)")
        L = row.length
        if fused and unfused:
            r = unfused.median_ms / fused.median_ms
            claims.append(f"fused faster than the unfused Numba pipeline at L = {L}: {'yes' if r > 1 else 'no'}, {r:.2f}x")
        if fused and naive_ms:
            r = naive_ms / fused.median_ms
            claims.append(f"fused faster than naive torch fp32 at L = {L}: {'yes' if r > 1 else 'no'}, {r:.2f}x")
        if fused and record.peak_fp32_flops:
            frac = flops_of(row, fused.name) / (fused.median_ms * 1e-3) / record.peak_fp32_flops
            claims.append(f"fused at L = {L} runs at {frac:.0%} of the FP32 peak ({fused.name})")
    if ncu_record and ncu_record.ratio:
        r = ncu_record.ratio
        claims.append(f"fused moves >= 10x fewer DRAM bytes than unfused at L = {ncu_record.length}, "
                      f"{ncu_record.heads} heads (ncu): "
                      f"{'yes' if r >= 10 else 'no'}, {r:.0f}x")
    return claims


def dram_table(record: AttentionDram) -> str:
    """DRAM megabytes read and written per profiled kernel, and the two pipelines' ratio."""
    rows = [[k.kernel, f"{k.dram_read / 1e6:.1f}", f"{k.dram_write / 1e6:.1f}"] for k in record.kernels]
    ratio = f"unfused / fused DRAM bytes: {record.ratio:.1f}x" if record.ratio else "no fused launch profiled"
    return table(rows, ["kernel", "DRAM read MB", "DRAM written MB"]) + "\n" + ratio


def title(row: AttentionRow) -> str:
    """The title of one length's panel."""
    return f"attention B={row.batch} H={row.heads} L={row.length} d={row.head_dim}"


def save_plot(folder: Path | None = None) -> Path | None:
    """Draw the committed attention record as ``reductions_attention.png``, and the FP32 kernel's steps
    (:func:`plot_steps`) as ``reductions_attention_steps.png`` beside it (no GPU needed)."""
    record = committed()
    path = save_figure(record, title, folder)
    if path is not None and record is not None:
        figure = plot_steps(record)
        figure.savefig(path.with_name("reductions_attention_steps.png"), dpi=110)
        plt.close(figure)
    return path


LESSON_COLUMNS = ("numba fused q", "numba unfused (", "torch naive fp32", "torch SDPA efficient", "torch SDPA flash")
"""What notebook 12 prints at each length: the fastest fused block shape, the unfused pipeline, torch's three."""


def in_lesson_12(name: str) -> bool:
    """Whether notebook 12's figure draws the implementation of this name: those of :data:`LESSON_COLUMNS`, at every
    block shape (not causal: half the work; the tiled and tensor-core kernels are notebook 13's)."""
    return name.startswith(LESSON_COLUMNS)


def attention_summary_table(record: AttentionBench) -> str:
    """Time and TFLOP/s of the fastest fused block shape, the unfused pipeline and torch's three, one row a length."""
    rows, shapes = [], set()
    for row in record.rows:
        found = [best(row, prefix) for prefix in LESSON_COLUMNS]
        shapes |= {found[0].name.removeprefix("numba fused ")} if found[0] else set()
        rows.append([row.length] + [None if m is None else
                                    f"{m.median_ms:.3f} ms ({flops_of(row, m.name) / m.median_ms / 1e9:.1f})"
                                    for m in found])
    fused = f"numba fused {', '.join(sorted(shapes))}" if shapes else "numba fused"
    columns = ["L: ms (TFLOP/s)", fused, "numba unfused", "torch naive fp32", "SDPA efficient fp32", "SDPA flash bf16"]
    return table(rows, columns, align="rrrrrr")


FP32_STEPS = (("one thread per row\n(64 rows a block)", "numba fused q64/k64/b4/s2"),
              ("one thread per row\n(best block shape)", "numba fused q"),
              ("register-tiled\n(best shape)", "numba tiled q"))
"""The FP32 fused kernel, step by step: (label, the record's name or name prefix, fastest taken)."""

FP32_PLOT_STEPS = (*FP32_STEPS, ("torch naive fp32\n(TF32 off)", "torch naive fp32"))
"""The steps as plotted: with torch's unfused FP32 composition, the like-for-like peer, beside them."""

TENSOR_CORE_STEPS = (("ours, TF32\n(one pass)", "numba TF32 tensor cores w"),
                     ("torch naive\nTF32", "torch naive TF32"),
                     ("ours, 3xTF32\n(one sum)", "numba 3xTF32 tensor cores w"),
                     ("ours, 3xTF32\n(tile sums)", "numba 3xTF32 tile sums w"),
                     ("SDPA efficient\nfp32", "torch SDPA efficient fp32"),
                     ("ours, bf16", "numba bf16 tensor cores"),
                     ("SDPA flash\nbf16", "torch SDPA flash bf16"))
"""Attention on tensor cores, ours beside PyTorch's in each precision (not causal; a prefix takes the fastest shape).
3xTF32 twice: every tile summed into O by the tensor cores (one sum), and each tile summed apart (tile sums), the
shape within float32's accuracy that the default rule picks."""


def plot_steps(record: AttentionBench, steps: tuple[tuple[str, str], ...] = FP32_PLOT_STEPS,
               ceilings: bool = True) -> Figure:
    """TFLOP/s of each step at the record's longest sequence (not causal); with ``ceilings``, against the FP32 peak
    and cuBLAS's FP32 rate measured in the same run (a line each, where the record has it)."""
    row = max(record.rows, key=lambda r: r.length)
    found = [(label, best(row, name, without="causal")) for label, name in steps]
    shown = [(label, m) for label, m in found if m is not None]
    if not shown:
        raise ValueError(f"the record times none of: {', '.join(name for _, name in steps)}")
    rates = [flops_of(row, m.name) / m.median_ms / 1e9 for _, m in shown]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 * len(shown)), 3.6), layout="constrained")  # room for each label
    ax.tick_params(axis="x", labelsize=8)
    colors = ["#dd8452" if m.name.startswith("torch") else "#4c72b0" for _, m in shown]
    bars = ax.bar([label for label, _ in shown], rates, color=colors)
    for bar, (_, m), rate in zip(bars, shown, rates):
        ax.annotate(f"{rate:.1f}\n{m.median_ms:.2f} ms", (bar.get_x() + bar.get_width() / 2, rate),
                    ha="center", va="bottom", fontsize=8)
    lines = ((record.peak_fp32_flops, "FP32 peak", "--"),
             (record.sgemm_fp32_flops, "cuBLAS SGEMM, same run", ":")) if ceilings else ()
    for value, label, style in lines:
        if value:
            ax.axhline(value / 1e12, color="#c44e52", linestyle=style, label=f"{label}: {value / 1e12:.1f}")
    ax.set_ylabel("TFLOP/s (FP32)" if ceilings else "TFLOP/s")
    ax.set_ylim(0, (1.6 if lines else 1.25) * max([*rates, *((v or 0) / 1e12 for v, _, _ in lines)]))  # room for the key
    ax.set_title(f"{title(row)}, not causal", fontsize=9)
    key = ax.get_legend_handles_labels()[0]  # the ceilings drawn
    if any(name.startswith("torch") for name in (m.name for _, m in shown)):  # say which colour is whose
        key = [Patch(color="#4c72b0", label="Numba (ours)"), Patch(color="#dd8452", label="PyTorch"), *key]
    if key:
        ax.legend(handles=key, loc="upper left", fontsize=8)
    return fig


FUSION_PAIRS = (("FP32 units", "numba unfused (S, P in memory)", "numba tiled q", "numba unfused fp32",
                 "numba tiled fp32"),
                ("tensor cores, TF32", "numba unfused TF32 (S, P in memory)", "numba TF32 tensor cores w",
                 "numba unfused TF32", "numba TF32 tensor cores"))
"""(units, the unfused pipeline's name, the fused kernel's name prefix, and their pipelines in the ncu record)."""


def fusion_ratios(record: AttentionBench, ncu_record: AttentionDram | None = None) -> list[str]:
    """What fusion saves on each kind of unit, at the record's longest sequence: the unfused pipeline's time over
    the fused kernel's, beside their DRAM bytes (ncu, one batch of heads) where the profile has both."""
    row, lines = max(record.rows, key=lambda r: r.length), []
    for units, unfused_name, fused_prefix, unfused_pipe, fused_pipe in FUSION_PAIRS:
        unfused, fused = best(row, unfused_name), best(row, fused_prefix, without="causal")
        if unfused is None or fused is None:
            continue
        line = (f"{units}: unfused {unfused.median_ms:.2f} ms, fused {fused.median_ms:.2f} ms: "
                f"{unfused.median_ms / fused.median_ms:.1f}x")
        dram = (ncu_record.pipelines if ncu_record else {})
        if dram.get(unfused_pipe) and dram.get(fused_pipe):
            line += (f"; DRAM {dram[unfused_pipe] / 1e9:.2f} GB against {dram[fused_pipe] / 1e9:.3f} GB "
                     f"(ncu: L = {ncu_record.length}, one batch of {ncu_record.heads} heads)")
        lines.append(line)
    return lines


def fp32_steps(record: AttentionBench) -> list[str]:
    """One line per FP32 step of :data:`FP32_STEPS` and torch's FP32 composition at the longest sequence (not
    causal): time, TFLOP/s and the share of the FP32 peak; then the peak and cuBLAS's rate from the same run."""
    row, lines = max(record.rows, key=lambda r: r.length), []
    for label, name in (*FP32_STEPS, ("torch naive fp32 (TF32 off)", "torch naive fp32")):
        m = best(row, name, without="causal")
        if m is not None:
            rate = flops_of(row, m.name) / m.median_ms / 1e9
            share = f", {rate * 1e12 / record.peak_fp32_flops:.0%} of the FP32 peak" if record.peak_fp32_flops else ""
            lines.append(f"{label.replace(chr(10), ' ')}: {m.median_ms:.2f} ms, {rate:.1f} TFLOP/s{share}"
                         + (f" ({m.name.removeprefix('numba ')})" if m.name != name and m.name.startswith('numba') else ""))
    if record.peak_fp32_flops and record.sgemm_fp32_flops:
        lines.append(f"FP32 peak {record.peak_fp32_flops / 1e12:.1f} TFLOP/s; cuBLAS SGEMM in the same run "
                     f"{record.sgemm_fp32_flops / 1e12:.1f} TFLOP/s")
    return lines


def tensor_core_lines(record: AttentionBench) -> list[str]:
    """One line per entry of :data:`TENSOR_CORE_STEPS` at the longest sequence (not causal): time, TFLOP/s and the
    error against float64 relative to the largest output, the fastest shape named."""
    row, lines = max(record.rows, key=lambda r: r.length), []
    for label, name in TENSOR_CORE_STEPS:
        m = best(row, name, without="causal")
        if m is not None:
            lines.append(f"{label.replace(chr(10), ' '):36s} {m.median_ms:6.3f} ms {flops_of(row, m.name) / m.median_ms / 1e9:6.1f}"
                         f" TFLOP/s  error {m.max_rel_err:.1e}" + (f"  (w{m.name.split(' w', 1)[1]})" if name.endswith(" w") else ""))
    return lines
