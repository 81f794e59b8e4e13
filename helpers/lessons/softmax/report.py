"""What notebook 11 shows of the softmax measurements: the table, the claims, bytes in flight, the figure.

The attention lessons (12, 13) and the AdamW one (14) read their records the same way: :func:`committed_record`,
:func:`best`, :func:`median`, :func:`measurement_table` and :func:`draw` serve all three.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from helpers import results
from helpers.device import resident_blocks_per_sm
from helpers.harness.tables import table

from .record import Measured, SoftmaxBench, SoftmaxRow

R = TypeVar("R", bound=results.Record)


def committed_record(cls: type[R]) -> R | None:
    """The committed H200 record of ``cls``, or None (saying why) if there is none."""
    part = cls.SCHEMA.removeprefix("reductions_")
    try:
        record = results.load(cls)
    except results.ResultError as error:
        print(f"no committed H200 result for {part}: {error}")
        return None
    where = record.provenance.describe() if record.provenance else "(no provenance recorded)"
    print(f"committed result ({part}): {where}")
    return record


def committed() -> SoftmaxBench | None:
    """The committed H200 softmax record (notebook 11), or None."""
    return committed_record(SoftmaxBench)


def median(row: Any, name: str) -> float | None:
    """The median time of the implementation called ``name`` in ``row``, or None if absent or untimed."""
    m = next((m for m in row.measured if m.name == name), None)
    return None if m is None else m.median_ms


def best(row: Any, prefix: str, without: str | None = None) -> Measured | None:
    """The fastest checked measurement whose name starts with ``prefix`` (and does not hold ``without``)."""
    timed = [m for m in row.measured if m.name.startswith(prefix) and m.median_ms is not None
             and not (without and without in m.name)]
    return min(timed, key=lambda m: m.median_ms) if timed else None


def measurement_table(rows: list[Any], label: tuple[str, str, Callable[[Any], Any]],
                      rate: tuple[str, Callable[[Any, Any], str]], error: str, digits: int) -> str:
    """One line per measurement: the row's ``label`` (its column, ``l`` or ``r``, and how to write it), the name,
    the time, the ``rate`` (its column and ``rate(row, measured)``), the ``error`` column and the note."""
    cells = []
    for row in rows:
        for m in row.measured:
            timed = m.median_ms is not None
            cells.append([label[2](row), m.name, f"{m.median_ms:.{digits}f} ms" if timed else None,
                          rate[1](row, m) if timed else None,
                          None if m.max_rel_err is None else f"{m.max_rel_err:.1e}", m.note])
    return table(cells, [label[0], "implementation", "time", rate[0], error, "note"], align=label[1] + "lrrrl")


def softmax_table(record: SoftmaxBench) -> str:
    """Time and GB/s (x read once plus out written once) per implementation and shape."""
    text = measurement_table(record.rows, ("M x N", "r", lambda row: f"{row.rows} x {row.cols}"),
                             ("GB/s", lambda row, m: f"{row.bytes_moved / m.median_ms / 1e6:.0f}"), "max rel err",
                             digits=4)
    if record.copy_ceiling_gbs:
        text += f"\ndevice-to-device copy, same run: {record.copy_ceiling_gbs:.0f} GB/s"
    if record.l2_flushed:
        text += "\n(L2 flushed before every timed repeat)"
    return text


def softmax_claims(record: SoftmaxBench) -> list[str]:
    """The performance claims about the fused softmax, each answered from the record."""
    claims = []
    for row in record.rows:
        fused, unfused = best(row, "numba fused"), best(row, "numba unfused")
        torch_ms = median(row, "torch.softmax")
        shape = f"{row.rows} x {row.cols}"
        if fused and torch_ms:
            ratio = torch_ms / fused.median_ms
            claims.append(f"fused Numba softmax at least as fast as torch.softmax at {shape}: "
                          f"{'yes' if ratio >= 1 else 'no'}, {ratio:.2f}x its throughput")
        if fused and unfused:
            ratio = unfused.median_ms / fused.median_ms
            claims.append(f"fused is >= 3x faster than the four Numba kernels at {shape}: "
                          f"{'yes' if ratio >= 3 else 'no'}, {ratio:.2f}x")
        if fused and record.copy_ceiling_gbs:
            frac = row.bytes_moved / fused.median_ms / 1e6 / record.copy_ceiling_gbs
            claims.append(f"fused softmax at {shape} reaches {frac:.0%} of the device copy's bandwidth "
                          f"({fused.name})")
    return claims


@dataclass
class InFlight:
    """How many bytes of loads one Numba softmax configuration can have outstanding."""

    name: str
    threads_per_block: int
    registers: int
    blocks_per_sm: int  # resident blocks, limited by registers, threads and block slots
    loads_per_thread: int  # independent loads a thread can have outstanding at once
    bytes_in_flight: int  # over the whole GPU
    achieved_gbs: float
    load_bytes: int = 4  # per load: a float, or a float4 for the 16-byte kernels

    @property
    def kib_per_sm(self) -> float:
        """The bytes one SM's resident blocks can have outstanding, in KiB (notebook 10's unit)."""
        return self.blocks_per_sm * self.threads_per_block * self.loads_per_thread * self.load_bytes / 1024


_IN_FLIGHT = ("numba fused", "numba 16-byte", "numba online")


def bytes_in_flight(record: SoftmaxBench, rows: int = 16384, cols: int = 4096) -> list[InFlight]:
    """Bytes in flight for each timed fused, 16-byte and online Numba softmax at one shape.

    A row-in-registers thread issues all its ``ceil(cols / threads)`` loads before it
    uses any (a 16-byte one its ``ceil(cols / 4 / lanes)`` float4 loads); an online
    thread uses each value before its next load, so count one.  The
    blocks an SM holds are :func:`helpers.device.resident_blocks_per_sm`'s (this GPU's
    limits; the H200's in the simulator).
    """
    if record.provenance is None or record.provenance.sm_count is None:
        raise results.ResultError("bytes_in_flight needs the SM count of the GPU that was measured (its provenance)")
    sms = record.provenance.sm_count
    out = []
    for row in record.rows:
        if (row.rows, row.cols) != (rows, cols):
            continue
        for m in row.measured:
            if m.median_ms is None or not m.registers or not m.name.startswith(_IN_FLIGHT):
                continue
            t = m.threads_per_block
            vector = re.match(r"numba 16-byte, (\d+) lanes/row", m.name)
            width = 16 if vector else 4
            if vector:  # float4s: a quarter as many loads, each four times as wide
                loads = -(-cols // (4 * int(vector.group(1))))
            else:
                loads = -(-cols // t) if m.name.startswith("numba fused") else 1
            blocks = resident_blocks_per_sm(m.registers, t)
            out.append(InFlight(m.name, t, m.registers, blocks, loads, sms * blocks * t * loads * width,
                                row.bytes_moved / m.median_ms / 1e6, width))
    return out


def draw(record: Any, title: Callable[[Any], str], keep: Callable[[str], bool] = lambda name: True) -> Figure:
    """One panel per measured shape: GPU time of every implementation ``keep`` takes by name (log scale), Numba in
    blue, torch in orange; a time with the host's cost in it (its note says so) as a hollow point."""
    rows = record.rows
    shown = sum(1 for r in rows for m in r.measured if m.median_ms and keep(m.name))
    fig, axes = plt.subplots(len(rows), 1, figsize=(9, 0.28 * shown + 1.3 * len(rows)),
                             squeeze=False, layout="constrained")  # constrained: long names are not cut off
    hosted = False
    for ax, row in zip(axes[:, 0], rows):
        timed = [m for m in row.measured if m.median_ms and keep(m.name)]
        y = list(range(len(timed)))[::-1]  # points, not bars: a bar's length means nothing on a log axis
        for host in (False, True):  # filled points, then hollow ones (host time in them)
            points = [(m, at) for m, at in zip(timed, y) if m.host_time_in_it == host]
            hosted |= host and bool(points)
            if points:
                colours = [_colour(m.name) for m, _ in points]
                ax.scatter([m.median_ms for m, _ in points], [at for _, at in points], edgecolors=colours,
                           facecolors="none" if host else colours, zorder=3)
        ax.set_yticks(y, [m.name for m in timed])
        ax.set_xscale("log")
        plain_log_ticks(ax)
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.set_xlabel("median time (ms), log scale: GPU time" + ("; hollow: host time in it" if hosted else ""))
        ax.set_title(title(row), fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    where = record.provenance
    key = [Line2D([], [], ls="", marker="o", color=_colour(who), label=who) for who in ("Numba", "torch")]
    if hosted:
        key.append(Line2D([], [], ls="", marker="o", markerfacecolor="none", color="grey", label="host time in it"))
    fig.legend(handles=key, loc="outside upper right", fontsize=8, ncols=len(key))
    fig.suptitle(f"{where.device if where else ''}, {where.date[:10] if where else ''}", fontsize=8)
    return fig


def save_figure(record: results.Record | None, title: Callable[[Any], str], folder: Path | None = None) -> Path | None:
    """Draw ``record`` as ``<SCHEMA>.png`` in ``folder`` (the committed results' by default); None without a record."""
    if record is None:
        return None
    path = (folder or results.RESULTS_DIR / results.COMMITTED) / f"{record.SCHEMA}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    figure = draw(record, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def title(row: SoftmaxRow) -> str:
    """The title of one shape's panel."""
    return f"softmax {row.rows} x {row.cols}"


def save_plot(folder: Path | None = None) -> Path | None:
    """Draw the committed softmax record as ``reductions_softmax.png`` (no GPU needed)."""
    return save_figure(committed(), title, folder)


def _colour(name: str) -> str:
    """Numba's implementations blue, the others (torch's) orange."""
    return "tab:blue" if name.lower().startswith("numba") else "tab:orange"


def plain_log_ticks(ax: Any) -> None:
    """Label a log x axis at 1, 2 and 5 times each power of ten (more over a short span), written plainly
    (0.02, not 2x10^-2), and nothing at the minor ticks: no labels run into each other."""
    low, high = ax.get_xlim()
    short = high / low < 30  # under a decade and a half: six labels a decade still have room
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1, 1.5, 2, 3, 5, 7) if short else (1, 2, 5)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


LESSON_COLUMNS = ("numba unfused", "numba fused", "numba 16-byte", "torch.softmax", "torch.compile")
"""What notebook 11 prints at each shape: the unfused Numba kernels, the best fused one with a block per row, the best
16-byte one, torch.softmax and torch.compile."""


def softmax_summary_table(record: SoftmaxBench) -> str:
    """GB/s (x read once, out written once) of the unfused, best fused, best 16-byte, torch.softmax and torch.compile
    softmax, one row a shape.

    The best fused and 16-byte kernels are named in their cells; the last column is the fastest Numba kernel's share
    of the device copy's bandwidth.
    """
    rows = []
    for row in record.rows:
        found = [best(row, prefix) for prefix in LESSON_COLUMNS]
        cells = [None if m is None else f"{row.bytes_moved / m.median_ms / 1e6:.0f}" for m in found]
        for i, prefix in ((1, "numba fused, "), (2, "numba 16-byte, ")):
            if found[i] is not None:  # "128 threads/row" -> "128 threads"; "32 lanes/row, 2 rows/block" -> "32 lanes x 2"
                shape = found[i].name.removeprefix(prefix).replace("/row", "").replace(" rows/block", "")
                cells[i] += f" ({shape.replace(', ', ' x ')})"
        numba = best(row, "numba")
        copy = None if numba is None or not record.copy_ceiling_gbs else \
            f"{row.bytes_moved / numba.median_ms / 1e6 / record.copy_ceiling_gbs:.0%}"
        rows.append([f"{row.rows} x {row.cols}", *cells, copy])
    columns = ["M x N (GB/s)", "numba unfused", "best fused", "best 16-byte", "torch.softmax", "torch.compile",
               "numba/copy"]
    return table(rows, columns, align="rrllrrr")
