"""One order of magnitude out: copies between host memory and the GPU.

Three measurements, all with CUDA events (see :mod:`helpers.timing`):

* :func:`transfer_bandwidth` -- one copy of ``nbytes`` host->device or device->host,
  from *pageable* host memory (an ordinary NumPy array, which the driver must stage
  through a pinned buffer) or *pinned* memory (``cuda.pinned_array``, which the GPU's
  copy engine reads directly).
* :func:`measure_transfers` -- a sweep of sizes for all four, beside the
  device-to-device copy of :func:`helpers.timing.copy_bandwidth`, as a JSON-ready record;
  :func:`plot_transfers` draws it.
* :func:`pipeline_timings` -- the chapter's pipeline launched on host NumPy arrays
  (Numba copies every one in and out around every launch) against the same kernels on
  arrays that stay on the device.

In the simulator there is no host link to measure: every function says so and returns
``None``, never a made-up number.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from helpers.backend import is_simulator
from helpers.checks import check_close, poison, random_inputs
from helpers.device import banner, device_name
from helpers.pipeline import add_kernel, fused_kernel, multiply_kernel, reference, scale_kernel
from helpers.results import Record, save
from helpers.sizes import BLOCK_SIZE, blocks_for, default_size
from helpers.timing import SIMULATOR_MESSAGE, Timing, copy_bandwidth, time_gpu

DIRECTIONS = ("host->device", "device->host")
HOST_MEMORY = ("pageable", "pinned")


@dataclass
class PipelineOnHost:
    """The pipeline on host arrays (implicit copies) against the same kernels on device arrays."""

    n: int
    median_ms: dict[str, float]
    spread_ms: dict[str, float]


@dataclass(kw_only=True)
class Transfers(Record):
    """GB/s against copy size for each kind of copy, and the pipeline with and without implicit copies."""

    SCHEMA: ClassVar[str] = "transfers"
    VERSION: ClassVar[int] = 2
    sizes_bytes: list[int]
    gbs: dict[str, list[float]]
    repeats: int
    pipeline: PipelineOnHost | None = None


def transfer_sizes() -> list[int]:
    """Copy sizes in bytes for the sweep: 4 KiB to 1 GiB, by factors of four."""
    return [2**k for k in range(12, 31, 2)]


def _check(direction: str, memory: str, nbytes: int) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if memory not in HOST_MEMORY:
        raise ValueError(f"memory must be one of {HOST_MEMORY}, got {memory!r}")
    if nbytes < 4 or nbytes % 4:
        raise ValueError(f"nbytes must be a positive multiple of 4 (float32 elements), got {nbytes}")


def transfer_bandwidth(direction: str, memory: str, nbytes: int, repeats: int = 10) -> tuple[Timing, float] | None:
    """Time copying ``nbytes`` in one direction; return the timing and GB/s (bytes one way).

    ``None`` in the simulator, after saying why.
    """
    _check(direction, memory, nbytes)
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    from numba import cuda

    n = nbytes // 4
    host = cuda.pinned_array(n, dtype=np.float32) if memory == "pinned" else np.empty(n, dtype=np.float32)
    host[:] = 1.0  # touch every page, so that first-touch faults are not timed
    device = cuda.to_device(host)
    if direction == "host->device":
        run = lambda: device.copy_to_device(host)  # noqa: E731
    else:
        run = lambda: device.copy_to_host(host)  # noqa: E731
    timing = time_gpu(run, label=f"{direction} ({memory})", repeats=repeats, warmup=2)
    assert timing is not None
    return timing, timing.bandwidth_gbs(nbytes)


def measure_transfers(sizes: list[int] | None = None, repeats: int = 10) -> Transfers | None:
    """GB/s against copy size for host<->device (pageable, pinned) and device<->device.

    Host<->device GB/s count the bytes copied (one way); the device-to-device copy
    counts bytes read plus written, as memory bandwidth is usually quoted.
    """
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    sizes = sizes or transfer_sizes()
    series: dict[str, list[float]] = {}
    for direction in DIRECTIONS:
        for memory in HOST_MEMORY:
            label = f"{direction} ({memory})"
            series[label] = []
            for nbytes in sizes:
                measured = transfer_bandwidth(direction, memory, nbytes, repeats)
                assert measured is not None
                series[label].append(measured[1])
    device = []
    for nbytes in sizes:
        measured = copy_bandwidth(nbytes // 4, repeats=repeats)
        assert measured is not None
        device.append(measured[1])
    series["device->device copy (read + write)"] = device
    return Transfers(sizes_bytes=sizes, gbs=series, repeats=repeats)


def plot_transfers(record: Transfers, title: str = "") -> Any:
    """GB/s against copy size, one line per kind of copy; returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = record.sizes_bytes
    for label, values in record.gbs.items():
        style = "-" if "device->device" in label else "--" if "pageable" in label else "-o"
        _ = ax.plot(sizes, values, style, label=label, markersize=3)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per copy")
    ax.set_ylabel("GB/s")
    ax.set_title(title or "host link against device memory")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def pipeline_timings(n: int, repeats: int = 5) -> dict[str, Timing] | None:
    """The pipeline on host arrays (implicit copies every launch) against on-device arrays.

    Four workloads, each checked against NumPy before it is timed:
    ``three kernels, host arrays``, ``fused, host arrays``, ``three kernels, on device``
    and ``fused, on device``.  ``None`` in the simulator.
    """
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    from numba import cuda


    a, b, c = random_inputs(n)
    s = np.float32(1.5)
    blocks = blocks_for(n)
    host = {name: np.full(n, np.nan, dtype=np.float32) for name in ("t1", "t2", "out")}
    dev = {name: cuda.to_device(x) for name, x in (("a", a), ("b", b), ("c", c))}
    dev.update({name: cuda.to_device(x) for name, x in host.items()})

    def three(x: dict[str, Any], a: Any, b: Any, c: Any) -> None:
        add_kernel[blocks, BLOCK_SIZE](a, b, x["t1"])
        multiply_kernel[blocks, BLOCK_SIZE](x["t1"], c, x["t2"])
        scale_kernel[blocks, BLOCK_SIZE](x["t2"], s, x["out"])

    def fused(x: dict[str, Any], a: Any, b: Any, c: Any) -> None:
        fused_kernel[blocks, BLOCK_SIZE](a, b, c, s, x["out"])

    runs = {
        "three kernels, host arrays": lambda: three(host, a, b, c),
        "fused, host arrays": lambda: fused(host, a, b, c),
        "three kernels, on device": lambda: three(dev, dev["a"], dev["b"], dev["c"]),
        "fused, on device": lambda: fused(dev, dev["a"], dev["b"], dev["c"]),
    }
    expected = reference(a, b, c, s)
    timings: dict[str, Timing] = {}
    for label, run in runs.items():
        target = host if "host" in label else dev
        if "host" in label:
            target["out"][:] = np.nan  # poison, so that an unwritten element is caught
        else:
            poison(target["out"])
        run()
        cuda.synchronize()
        check_close(target["out"], expected, name=f"out ({label})")
        timing = time_gpu(run, label=label, repeats=repeats, warmup=1)
        assert timing is not None
        timings[label] = timing
    return timings


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.lessons.transfers.transfers``: host link against device memory; writes ``transfers.json`` and a plot."""
    parser = argparse.ArgumentParser(prog="python -m helpers.lessons.transfers.transfers", description=main.__doc__.split(":", 1)[1].strip())
    parser.add_argument("--repeats", type=int, default=10, help="timed copies per size")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/<gpu>)")
    args = parser.parse_args(argv)
    print(banner())
    record = measure_transfers(repeats=args.repeats)
    if record is None:
        return 0
    n = default_size()
    timings = pipeline_timings(n, repeats=5)
    assert timings is not None
    record.pipeline = PipelineOnHost(n=n, median_ms={k: t.median_ms for k, t in timings.items()},
                                     spread_ms={k: t.spread_ms for k, t in timings.items()})
    path = save(record, folder=args.out)
    plot_transfers(record, title=f"host link against device memory ({device_name()})").savefig(
        path.with_suffix(".png"), dpi=120)
    for label, values in record.gbs.items():
        print(f"{label:40s} {values[-1]:8.1f} GB/s at {record.sizes_bytes[-1]} bytes")
    for timing in timings.values():
        print(timing)
    print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
