"""One order of magnitude out: copies between host memory and the GPU, and between two GPUs (CUDA events).

:func:`transfer_bandwidth` copies from *pageable* host memory (staged by the driver through a pinned
buffer) or *pinned* memory (read by the copy engine directly); :func:`measure_transfers` sweeps sizes
beside the device copy; :func:`pipeline_timings` launches the pipeline on host arrays (copied around
every launch) against device arrays; :func:`measure_two_gpus` gathers :mod:`.multigpu`'s figures.  In the
simulator, or with fewer than two GPUs for the last, each says why and returns ``None``.
"""

from __future__ import annotations

import argparse

import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import random_inputs
from helpers.device import banner, device_name
from helpers.harness.cli import Command
from helpers.lessons.transfers.multigpu import (check_nbytes, checked_timings, gpu_count, gpu_name, link_between,
                                                needs_two_gpus, on_gpu, peer_access, peer_copy_bandwidth, ready,
                                                split_pipeline)
from helpers.lessons.transfers.record import PipelineOnHost, Transfers, TwoGpus
from helpers.lessons.transfers.report import host_link_lines, plot_transfers, two_gpus_lines
from helpers.pipeline import launch_fused, launch_three, reference
from helpers.results import Provenance, folder_for
from helpers.sizes import default_size
from helpers.timing import SIMULATOR_MESSAGE, Timing, copy_bandwidth, time_gpu

DIRECTIONS = ("host->device", "device->host")
HOST_MEMORY = ("pageable", "pinned")


def transfer_sizes() -> list[int]:
    """Copy sizes in bytes for the sweep: 4 KiB to 1 GiB, by factors of four."""
    return [2**k for k in range(12, 31, 2)]


def _check(direction: str, memory: str, nbytes: int) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if memory not in HOST_MEMORY:
        raise ValueError(f"memory must be one of {HOST_MEMORY}, got {memory!r}")
    check_nbytes(nbytes)


def transfer_bandwidth(direction: str, memory: str, nbytes: int, repeats: int = 10) -> tuple[Timing, float] | None:
    """Time copying ``nbytes`` in one direction: the timing and GB/s (bytes one way); ``None`` in the simulator."""
    _check(direction, memory, nbytes)
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
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
    """GB/s against copy size for host<->device (pageable, pinned; bytes one way) and the device copy (read +
    written, as memory bandwidth is quoted)."""
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    sizes = sizes or transfer_sizes()
    series: dict[str, list[float]] = {}
    for direction in DIRECTIONS:
        for memory in HOST_MEMORY:
            series[f"{direction} ({memory})"] = [transfer_bandwidth(direction, memory, nbytes, repeats)[1]  # type: ignore[index]
                                                 for nbytes in sizes]
    series["device->device copy (read + write)"] = [copy_bandwidth(nbytes // 4, repeats=repeats)[1]  # type: ignore[index]
                                                    for nbytes in sizes]
    return Transfers(sizes_bytes=sizes, gbs=series, repeats=repeats)


def pipeline_timings(n: int, repeats: int = 5) -> dict[str, Timing] | None:
    """Both pipelines on host arrays (implicit copies every launch) and on device arrays, each checked against
    NumPy before it is timed; ``None`` in the simulator."""
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    a, b, c = random_inputs(n)
    s = np.float32(1.5)
    host = {name: np.full(n, np.nan, dtype=np.float32) for name in ("t1", "t2", "out")}
    dev = {name: cuda.to_device(x) for name, x in (("a", a), ("b", b), ("c", c))}
    dev.update({name: cuda.to_device(x) for name, x in host.items()})
    runs = {  # the same launches on host arrays (Numba copies them in and out) and on device arrays
        "three kernels, host arrays": (lambda: launch_three(a, b, c, s, host["t1"], host["t2"], host["out"]),
                                       host["out"]),
        "fused, host arrays": (lambda: launch_fused(a, b, c, s, host["out"]), host["out"]),
        "three kernels, on device": (lambda: launch_three(dev["a"], dev["b"], dev["c"], s, dev["t1"], dev["t2"],
                                                          dev["out"]), dev["out"]),
        "fused, on device": (lambda: launch_fused(dev["a"], dev["b"], dev["c"], s, dev["out"]), dev["out"]),
    }
    return checked_timings(runs, reference(a, b, c, s), repeats, warmup=1)  # type: ignore[return-value]


def measure_two_gpus(nbytes: int = 2**28, n: int | None = None, repeats: int = 20) -> TwoGpus | None:
    """Every two-GPU figure in one record (``None`` with fewer than two GPUs)."""
    check_nbytes(nbytes)
    if not ready(0, 1):
        return None
    record = TwoGpus(
        devices=[gpu_name(i) for i in range(gpu_count())],
        link=link_between(0, 1),
        peer_access={"0->1": peer_access(0, 1), "1->0": peer_access(1, 0)},
        nbytes=nbytes,
        peer_copy={f"{s}->{d}": peer_copy_bandwidth(nbytes, s, d, repeats) for s, d in ((0, 1), (1, 0))},
        staged_copy={"0->1": peer_copy_bandwidth(nbytes, 0, 1, repeats, allow_peer=False)},
    )
    for gpu in (0, 1):
        with on_gpu(gpu):
            measured = copy_bandwidth(nbytes // 4, repeats=repeats)
            assert measured is not None
            record.device_copy_gbs[gpu] = {"label": measured[0].label, "gbs": measured[1]}
            record.host_link_pinned_gbs[gpu] = {
                d: transfer_bandwidth(d, "pinned", nbytes, repeats)[1] for d in DIRECTIONS}  # type: ignore[index]
    record.split_pipeline = split_pipeline(n or default_size(), repeats)
    return record


def _host_link(args: argparse.Namespace) -> Transfers | int:
    print(banner())
    record = measure_transfers(repeats=args.repeats)
    if record is None:
        return 0
    n = default_size()
    timings = pipeline_timings(n, repeats=5)
    assert timings is not None
    record.pipeline = PipelineOnHost(n=n, median_ms={k: t.median_ms for k, t in timings.items()},
                                     spread_ms={k: t.spread_ms for k, t in timings.items()})
    folder = args.out or folder_for(Provenance.here())
    folder.mkdir(parents=True, exist_ok=True)
    plot_transfers(record, title=f"host link against device memory ({device_name()})").savefig(
        folder / "transfers.png", dpi=120)
    print(host_link_lines(record, timings))
    return record


def _two_gpus(args: argparse.Namespace) -> TwoGpus | int:
    print(banner())
    found = gpu_count()
    if found < 2:
        print(f"{needs_two_gpus(found)}: nothing measured, nothing written")
        return 0
    record = measure_two_gpus()
    assert record is not None
    print(two_gpus_lines(record))
    return record


COMMANDS = [
    Command("host-link", "host<->device copies (pageable, pinned) against the device copy, and the pipeline on "
            "host arrays (transfers.json)", _host_link,
            lambda p: p.add_argument("--repeats", type=int, default=10, help="timed copies per size")),
    Command("two-gpus", "copies between two GPUs and the pipeline split across them (two_gpus.json)", _two_gpus),
]
