"""What the comparison's run prints: each implementation's GPU time and host time per call, and its check."""

from __future__ import annotations

from helpers.lessons.fuser.record import FuserVsCompile


def summary(record: FuserVsCompile) -> str:
    """One line per size and implementation."""
    return "\n".join(f"n = {row.n:>10,}  {name:14s} GPU {c.gpu_ms * 1e3:9.1f} µs  host {c.host_us:6.1f} µs/call"
                     f"  equal to NumPy: {c.equals_numpy} (max diff {c.max_abs_diff:.3g})"
                     for row in record.rows for name, c in row.contenders.items())
