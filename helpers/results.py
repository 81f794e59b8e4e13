"""Where a number was measured: device, driver, library versions and date.

Every JSON result in ``results/`` carries this record, so each figure in a
notebook or the README can say where it came from.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from .backend import is_simulator
from .device import banner, compute_capability, device_name, sm_count

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def driver_version() -> str | None:
    """The CUDA driver version as ``major.minor``, or ``None`` in the simulator."""
    if is_simulator():
        return None
    from numba import cuda

    major, minor = cuda.cudadrv.driver.driver.get_version()
    return f"{major}.{minor}"


def environment_record() -> dict[str, Any]:
    """A JSON-ready description of the machine and software taking a measurement."""
    return {
        "backend": "simulator" if is_simulator() else "gpu",
        "banner": banner(),
        "device": device_name(),
        "sm_count": sm_count(),
        "compute_capability": None if is_simulator() else list(compute_capability()),
        "cuda_driver": driver_version(),
        "python": platform.python_version(),
        "versions": {p: _version(p) for p in ("numba", "numba-cuda", "numpy", "cupy-cuda13x", "cupy-cuda12x", "torch", "triton")},
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def write_result(name: str, payload: dict[str, Any], folder: Path | None = None) -> Path:
    """Write ``payload`` plus the environment record as ``results/<device-or-simulator>/<name>.json``."""
    record = {"environment": environment_record(), **payload}
    folder = folder or RESULTS_DIR / ("simulator" if is_simulator() else "h200" if "H200" in device_name() else "gpu")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, default=float) + "\n")
    return path


def read_result(name: str, folder: Path | None = None) -> dict[str, Any]:
    """Read a committed result (the H200's by default)."""
    path = (folder or RESULTS_DIR / "h200") / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"no committed result {path}; run the benchmark on a GPU to create it")
    return json.loads(path.read_text())


def describe(record: dict[str, Any]) -> str:
    """One line saying where a result was measured, e.g. for a plot caption."""
    env = record["environment"]
    v = env["versions"]
    return (
        f"{env['device']}, driver {env['cuda_driver']}, numba {v['numba']}, "
        f"numba-cuda {v['numba-cuda']}, {env['date'][:10]}"
    )
