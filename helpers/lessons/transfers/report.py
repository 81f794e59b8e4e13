"""What lesson 08 shows: GB/s against copy size, and what the two runs print."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator

import matplotlib.pyplot as plt

from helpers.backend import uncoloured
from helpers.harness.tables import table
from helpers.lessons.transfers.record import Transfers, TwoGpus
from helpers.timing import Timing


def plot_transfers(record: Transfers, title: str = "") -> Any:
    """GB/s against copy size, one line per kind of copy; returns the matplotlib Figure."""
    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = record.sizes_bytes
    for label, values in record.gbs.items():
        style = "-" if "device->device" in label else "--" if "pageable" in label else "-o"
        _ = ax.plot(sizes, values, style, label=label, markersize=3)
    ax.set_xscale("log", base=2)
    ax.set(yscale="log", xlabel="bytes per copy", ylabel="GB/s", title=title or "host link against device memory")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def host_link_lines(record: Transfers, timings: dict[str, Timing]) -> str:
    """Each kind of copy at the largest size, then the pipeline's four timings."""
    rows = [[label, f"{values[-1]:.1f}"] for label, values in record.gbs.items()]
    copies = table(rows, [f"copy of {record.sizes_bytes[-1]:,} bytes", "GB/s"])
    return "\n".join([copies, *(str(t) for t in timings.values())])


def two_gpus_lines(record: TwoGpus) -> str:
    """The link, each copy's GB/s, and the split pipeline's timings and bytes across the link."""
    lines = [f"{' and '.join(record.devices[:2])}; link: {record.link['description']}"]
    for way, row in [*record.peer_copy.items(), *record.staged_copy.items()]:
        lines.append(f"  GPU{way} copy      {row['gbs']:8.1f} GB/s  ({row['path']})")
    for gpu, row in record.device_copy_gbs.items():
        lines.append(f"  GPU{gpu} device copy  {row['gbs']:8.1f} GB/s  (read + write)")
        lines += [f"  GPU{gpu} {way:13s} {gbs:8.1f} GB/s  (pinned)" for way, gbs in record.host_link_pinned_gbs[gpu].items()]
    split = record.split_pipeline or {"timings": {}, "link_bytes": 0, "link_bytes_per_element": 0}
    lines += [f"  {row['label']:45s} {row['median_ms']:.3f} ms" for row in split["timings"].values()]
    lines.append(f"  bytes across the link: {split['link_bytes']:,} ({split['link_bytes_per_element']:g} per element)")
    return "\n".join(lines)


HOST_COPY = "Host array used in CUDA kernel"  # the start of Numba's warning (given on a GPU only)


@contextlib.contextmanager
def host_copy_warnings() -> Iterator[None]:
    """Collect Numba's warning about host arrays and print it once, as plain text, with how many times it came.

    Other warnings show as usual, under the filters already set (``import helpers`` silences the occupancy
    warning for the series' small grids)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=".*" + HOST_COPY)  # every copy counted, not once per line
        yield
    ours = [w for w in caught if HOST_COPY in uncoloured(w.message)]
    for text in dict.fromkeys(uncoloured(w.message) for w in ours):
        print(f"{ours[0].category.__name__} ({len(ours)}x): {text}")
    for w in caught:
        if w not in ours:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


@contextlib.contextmanager
def quiet_host_copies() -> Iterator[None]:
    """Silence that warning where a cell's output must be the same on every backend."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*" + HOST_COPY)
        yield
