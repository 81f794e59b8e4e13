"""What notebook 14 shows of the AdamW measurements: the table, the claims, what launches cost, the figure."""

from __future__ import annotations

from pathlib import Path

from helpers.lessons.softmax.report import committed_record, measurement_table, median, save_figure

from .record import AdamWBench, AdamWRow

PER_TENSOR = "numba fused (one launch per tensor)"
FLAT = "numba fused, one launch over a flat buffer"
UNFUSED = "numba unfused (8 launches per tensor)"


def committed() -> AdamWBench | None:
    """The committed H200 AdamW record (notebook 14), or None."""
    return committed_record(AdamWBench)


def adamw_table(record: AdamWBench) -> str:
    """Time and GB/s (at the fused kernel's 28 B per element) per implementation and case."""
    return measurement_table(record.rows, ("case", "l", lambda row: row.case),
                             ("GB/s", lambda row, m: f"{row.bytes_fused / m.median_ms / 1e6:.0f}"), "diff vs torch", digits=3)


def adamw_claims(record: AdamWBench) -> list[str]:
    """The claims about the fused AdamW step, answered from the record."""
    claims = []
    for row in record.rows:
        ours, theirs = median(row, PER_TENSOR), median(row, "torch AdamW fused=True")
        if ours and theirs:
            r = ours / theirs
            where = "one tensor of 2^26" if row.case == "one tensor" else f"a list of {row.tensors} tensors"
            host = {m.name: m.host_time_in_it for m in row.measured}
            unlike = " (host time in ours, not in torch's)" if host[PER_TENSOR] > host["torch AdamW fused=True"] else ""
            claims.append(f"fused Numba step within 10% of torch's fused=True on {where}: "
                          f"{'yes' if r <= 1.1 else 'no'}, {r:.2f}x its time{unlike}")
    return claims


def launch_cost_us(per_tensor_ms: float, flat_ms: float, launches: int) -> float:
    """What each of ``launches`` launches costs beyond the bytes (µs): the per-tensor step's time less one launch
    over the same bytes (whose own launch is hidden), shared out among the launches."""
    return (per_tensor_ms - flat_ms) / launches * 1e3


def adamw_launches(record: AdamWBench) -> list[str]:
    """What the launch count costs on the list of tensors, from the record's times."""
    rows = [r for r in record.rows if r.case == "list"]
    if not rows:
        return ["no measurement of the list of tensors in this record"]
    row = rows[0]
    per_tensor, flat, unfused = median(row, PER_TENSOR), median(row, FLAT), median(row, UNFUSED)
    n = row.tensors
    lines = []
    if per_tensor and flat:
        lines.append(f"{n} launches: {per_tensor:.3f} ms; one launch over the same bytes: {flat:.3f} ms; "
                     f"so each launch costs about {launch_cost_us(per_tensor, flat, n):.1f} µs beyond the bytes (the single "
                     "launch's own cost is hidden)")
    if unfused and flat:
        lines.append(f"{8 * n} launches (unfused): {unfused:.3f} ms, {unfused / flat:.0f}x the single launch")
    one = [r for r in record.rows if r.case == "one tensor"]
    if one:
        big = median(one[0], PER_TENSOR)
        if big:
            gbs = one[0].bytes_fused / big / 1e6
            average = row.bytes_fused / n
            lines.append(f"an average tensor's {average / 1e6:.1f} MB take {average / gbs / 1e3:.2f} µs at the "
                         f"large tensor's {gbs:.0f} GB/s")
    return lines


def title(row: AdamWRow) -> str:
    """The title of one case's panel."""
    return f"AdamW, {row.case} ({row.tensors} tensor{'s' if row.tensors != 1 else ''}, {row.elements:,} elements)"


def save_plot(folder: Path | None = None) -> Path | None:
    """Draw the committed AdamW record as ``reductions_adamw.png`` (no GPU needed)."""
    return save_figure(committed(), title, folder)
