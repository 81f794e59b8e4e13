"""One text table for every printed table of the series.

    >>> print(table([["three kernels", 2.72], ["fused", 1.165]], ["pipeline", "ms"]))
    pipeline          ms
    three kernels   2.72
    fused          1.165

The first column is aligned left, the others right; a cell is printed with ``str``, except a
float, which keeps four significant figures, and ``None``, which prints as ``-``.
"""

from __future__ import annotations

from typing import Any, Sequence


def power_label(n: int) -> str:
    """How a size is printed: ``2^20`` for a power of two, the plain number otherwise."""
    n = int(n)
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def cell(value: Any) -> str:
    """How one value is printed in a table."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(rows: Sequence[Sequence[Any]], columns: Sequence[str], *, align: str | None = None) -> str:
    """``rows`` under the header ``columns``, each column as wide as its widest cell.

    ``align`` gives one letter a column, ``l`` or ``r`` (default: the first left, the rest right).
    """
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"every row needs {len(columns)} cells, one per column {list(columns)}")
    align = align or "l" + "r" * (len(columns) - 1)
    if len(align) != len(columns) or set(align) - {"l", "r"}:
        raise ValueError(f"align needs one of 'l' or 'r' per column, got {align!r}")
    text = [list(columns)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in text) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align)).rstrip()
             for r in text]
    return "\n".join(lines)
