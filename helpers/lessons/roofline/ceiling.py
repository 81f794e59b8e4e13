"""One bound and one best measurement, used by every lesson that compares bandwidths.

* **The bound** is the memory's datasheet rate: an H200's HBM3e moves at most
  4.8 TB/s.  No kernel can beat it, so ``bytes / bound`` is a true floor on a
  kernel's time, and a percentage of it can never pass 100%.
* **The best measurement** is the fastest *streaming* kernel measured on the H200
  (committed results) with the same mix of reads and writes: ``"1:1"`` (read one
  array, write one: the device copies) or ``"3:1"`` (read three, write one, like
  the fused kernel: ``stream3`` and ``torch.compile`` of ``a + b + c`` in
  ``roofline.json``).  It is what memory has been seen to deliver for that mix, not
  a law: it is a measurement with a spread, and a kernel of the same mix can land a
  few tenths of a percent above it.  Only the bound cannot be passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helpers.device import DATASHEET_BANDWIDTH_GBS
from helpers.lessons.roofline.record import Roofline
from helpers.lessons.sweep.record import Sweep
from helpers.results import load

COMMITTED_DEVICE = "NVIDIA H200"
LARGE_SIZES_FROM = 2**26  # "streaming": arrays at least 4x the 60 MiB L2
MIXES = ("1:1", "3:1")  # read:write mix: a copy reads one array and writes one; the fused kernel reads three


@dataclass(frozen=True)
class Best:
    """The fastest committed measurement of one read/write mix."""

    mix: str
    gbs: float
    kernel: str
    n: int
    source: str  # which committed result file

    def line(self) -> str:
        """E.g. ``best measured 3:1 streaming kernel: 4,498 GB/s (stream3_torch_compile, n = 2^28, roofline.json)``."""
        return (f"best measured {self.mix} streaming kernel: {self.gbs:,.0f} GB/s "
                f"({self.kernel}, n = 2^{self.n.bit_length() - 1}, {self.source})")


def bound_gbs(device: str = COMMITTED_DEVICE) -> float:
    """The datasheet bound in GB/s (the H200's HBM3e: 4,800)."""
    return DATASHEET_BANDWIDTH_GBS[device]


def candidates(mix: str, folder: Path | None = None) -> list[Best]:
    """Every committed streaming measurement (n >= 2^26) of kernels with the read/write ``mix``."""
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {MIXES}, got {mix!r}")
    found: list[Best] = []
    roof = load(Roofline, folder)
    for n, run in roof.runs.items():
        if n < LARGE_SIZES_FROM:
            continue
        if mix == "1:1":
            entries = {"device copy": run.copy}
        else:  # the streaming kernels: the fused kernel's access pattern, two additions instead of its arithmetic
            entries = {k: getattr(run, k) for k in ("stream3", "stream3_torch_compile")}
        found += [Best(mix, float(t.gbs), kernel, n, "roofline.json") for kernel, t in entries.items()
                  if t is not None and t.gbs]
    if mix == "3:1":
        return found
    sweep = load(Sweep, folder)
    wanted = {k for k, v in sweep.implementations.items() if v.device == "gpu" and v.status == "ok" and v.traffic == "copy"}
    for m in sweep.measurements:
        if m.implementation in wanted and m.mode in ("gpu", "gpu_cold") and m.n >= LARGE_SIZES_FROM and m.median_ms:
            per_element = sweep.implementations[m.implementation].bytes_per_element
            found.append(Best(mix, per_element * m.n / (m.median_ms * 1e-3) / 1e9, m.implementation, m.n,
                              "bench_sweep.json"))
    return found


def best_measured(mix: str = "3:1", folder: Path | None = None) -> Best:
    """The fastest committed streaming kernel with this read/write mix."""
    found = candidates(mix, folder)
    if not found:
        raise FileNotFoundError(f"no committed streaming measurement of the {mix} mix")
    return max(found, key=lambda b: b.gbs)


def describe(mix: str = "3:1", folder: Path | None = None) -> str:
    """Two lines: the bound, and the best committed measurement of ``mix`` with where it was taken."""
    best = best_measured(mix, folder)
    provenance = load(Roofline if best.source == "roofline.json" else Sweep, folder).provenance
    where = provenance.describe() if provenance else "no provenance recorded"
    return (f"bound: the H200's HBM3e datasheet, {bound_gbs():,.0f} GB/s (read + write)\n"
            f"{best.line()} = {best.gbs / bound_gbs():.0%} of the bound\n"
            f"  (that best measurement: a committed run, {where})")
