"""One bound and one best measurement, used by every lesson that compares bandwidths.

* **The bound** is the memory's datasheet rate: an H200's HBM3e moves at most
  4.8 TB/s.  No kernel can beat it, so ``bytes / bound`` is a true floor on a
  kernel's time, and a percentage of it can never pass 100%.
* **The best measurement** is the fastest kernel measured on the H200 (committed
  results) with the same mix of reads and writes: ``"1:1"`` (read one array,
  write one, like a copy) or ``"3:1"`` (read three, write one, like the fused
  kernel).  It is what a streaming kernel of that mix has been seen to reach, not
  a law: as the maximum over every measurement of that mix, nothing committed
  exceeds it, but a future run may.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .results import RESULTS_DIR

# Datasheet memory bandwidth, bytes per second (read + write), by device name.
DATASHEET_BYTES_PER_S = {"H200": 4.8e12, "H100": 3.35e12}
COMMITTED_DEVICE = "H200"
LARGE_SIZES_FROM = 2**26  # "streaming": arrays at least 4x the 60 MiB L2
MIXES = {"1:1": 8.0, "3:1": 16.0}  # read:write mix -> bytes per element of a kernel with that mix


@dataclass(frozen=True)
class Best:
    """The fastest committed measurement of one read/write mix."""

    mix: str
    gbs: float
    kernel: str
    n: int
    source: str  # which committed result file

    def line(self) -> str:
        """E.g. ``best measured 3:1 streaming kernel: 4,502 GB/s (numba fused (best), n = 2^28, bench_sweep.json)``."""
        return (f"best measured {self.mix} streaming kernel: {self.gbs:,.0f} GB/s "
                f"({self.kernel}, n = 2^{self.n.bit_length() - 1}, {self.source})")


def datasheet_bytes_per_s(device: str = COMMITTED_DEVICE) -> float | None:
    """The datasheet memory bandwidth of ``device`` (matched by name), or ``None`` if not known here."""
    for name, rate in DATASHEET_BYTES_PER_S.items():
        if name in device:
            return rate
    return None


def bound_gbs() -> float:
    """The H200's datasheet bound in GB/s (4,800)."""
    rate = datasheet_bytes_per_s()
    assert rate is not None
    return rate / 1e9


def _read(name: str, folder: Path | None) -> dict:
    path = (folder or RESULTS_DIR / "h200") / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"no committed result {path}")
    return json.loads(path.read_text())


def candidates(mix: str, folder: Path | None = None) -> list[Best]:
    """Every committed streaming measurement (n >= 2^26) of kernels with the read/write ``mix``."""
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {sorted(MIXES)}, got {mix!r}")
    found: list[Best] = []
    roof = _read("roofline", folder)
    for size, run in roof.get("runs", {}).items():
        n = int(size)
        entries: dict[str, dict] = {}
        if mix == "1:1":
            entries["device copy"] = run.get("copy") or {}
        else:
            entries.update({f"roofline {k}": v for k, v in (run.get("variants") or {}).items()})
            entries.update({k: run[k] for k in ("stream3", "torch_compile", "stream3_torch_compile") if isinstance(run.get(k), dict)})
        for kernel, entry in entries.items():
            if n >= LARGE_SIZES_FROM and entry.get("gbs"):
                found.append(Best(mix, float(entry["gbs"]), kernel, n, "roofline.json"))
    sweep = _read("bench_sweep", folder)
    per_element = {k: v.get("bytes_per_element") for k, v in sweep.get("implementations", {}).items()}
    want = {"1:1": {"device copy"}, "3:1": {k for k, v in sweep.get("implementations", {}).items()
                                            if v.get("traffic") == "fused" and v.get("device") == "gpu"}}[mix]
    for m in sweep.get("measurements", []):
        if m["implementation"] in want and m["mode"] in ("gpu", "gpu_cold") and m["n"] >= LARGE_SIZES_FROM and m.get("median_ms"):
            gbs = per_element[m["implementation"]] * m["n"] / (m["median_ms"] * 1e-3) / 1e9
            found.append(Best(mix, gbs, m["implementation"], m["n"], "bench_sweep.json"))
    return found


def best_measured(mix: str = "3:1", folder: Path | None = None) -> Best:
    """The fastest committed streaming kernel with this read/write mix."""
    found = candidates(mix, folder)
    if not found:
        raise FileNotFoundError(f"no committed streaming measurement of the {mix} mix")
    return max(found, key=lambda b: b.gbs)


def describe(mix: str = "3:1") -> str:
    """Two lines: the bound and the best measurement of ``mix``, for a notebook to print."""
    return (f"bound: the H200's HBM3e datasheet, {bound_gbs():,.0f} GB/s\n"
            f"{best_measured(mix).line()} = {best_measured(mix).gbs / bound_gbs():.0%} of the bound")
