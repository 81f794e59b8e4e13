"""What the comparison's run prints: each implementation's GPU time and host time per call, and its check."""

from __future__ import annotations

from helpers.harness.tables import table
from helpers.lessons.fuser.record import Contender, FuserVsCompile


def summary(record: FuserVsCompile) -> str:
    """One row per size and implementation."""
    rows = [[f"{row.n:,}", name, f"{c.gpu_ms * 1e3:.1f}", host_us(c), c.equals_numpy, f"{c.max_abs_diff:.3g}"]
            for row in record.rows for name, c in row.contenders.items()]
    return table(rows, ["n", "implementation", "GPU µs", "host µs/call", "equal to NumPy", "max diff"], align="rlrrrr")


def host_us(c: Contender) -> str:
    """The host time per call: its median, and its interquartile range where the record kept one."""
    return f"{c.host_us:.1f}" + ("" if c.host_iqr_us is None else f" (IQR {c.host_iqr_us:.1f})")
