"""Nsight Compute from Python: the ``ncu`` command line (the GPU's clocks left alone), run, and its CSV read back."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from typing import Any, Sequence

from helpers.lessons.dram.record import KernelCounters

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
KERNEL_REGEX = "regex:(add|multiply|scale|fused)_kernel"

_UNITS = {
    "byte": 1, "bytes": 1, "B": 1,
    "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9, "Tbyte": 1e12, "TB": 1e12,
    "Kibyte": 2**10, "KiB": 2**10, "Mibyte": 2**20, "MiB": 2**20, "Gibyte": 2**30, "GiB": 2**30,
}


class NcuError(RuntimeError):
    """ncu is missing, failed, or printed something this parser does not understand."""


def ncu_available() -> bool:
    """True when the ``ncu`` command is on PATH."""
    return shutil.which("ncu") is not None


def short_kernel_name(name: str) -> str:
    """``add_kernel`` from ncu's demangled or mangled name of a Numba kernel."""
    name = name.strip()
    if name.startswith("_ZN"):  # _ZN <len><name> <len><name> ... then B (abi tags) or E
        pos, last = 3, name
        while (m := re.match(r"\d+", name[pos:])) is not None:
            pos += len(m.group(0))
            last = name[pos : pos + int(m.group(0))]
            pos += int(m.group(0))
        return last
    base = name.split("(", 1)[0]
    base = re.sub(r"\[[^\]]*\]|<[^>]*>", "", base).strip()
    return base.split()[-1].split("::")[-1] if base else name


def _number(value: str, unit: str) -> float:
    text = value.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        raise NcuError(f"ncu printed no value ({value!r}) for a metric")
    scale = _UNITS.get(unit.strip())
    if scale is None:
        raise NcuError(f"unknown unit {unit!r} in ncu's output")
    return float(text) * scale


def csv_rows(text: str, need: Sequence[str] = ()) -> list[dict[str, str]]:
    """The rows of ``ncu --csv`` output, one per kernel and metric, with at least the columns ``need``.

    Lines that are not CSV are skipped; columns are found by name, so other ncu versions parse the same.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise NcuError('no CSV header ("ID",...) in the ncu output; was ncu run with --csv?')
    reader = csv.DictReader(io.StringIO("\n".join(ln for ln in lines[start:] if ln.startswith('"'))))
    missing = set(need) - set(reader.fieldnames or [])
    if missing:
        raise NcuError(f"ncu's CSV lacks the columns {sorted(missing)}")
    return list(reader)


def parse_ncu_csv(text: str) -> list[KernelCounters]:
    """The profiled kernels in ``ncu --csv`` output, in launch order, with their DRAM bytes."""
    kernels: dict[int, dict[str, Any]] = {}
    for row in csv_rows(text, ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")):
        if row["Metric Name"] not in METRICS:
            continue
        k = kernels.setdefault(
            int(row["ID"]),
            {"full_name": row["Kernel Name"], "grid": row.get("Grid Size", ""), "block": row.get("Block Size", "")},
        )
        k[row["Metric Name"]] = _number(row["Metric Value"], row["Metric Unit"])
    result = []
    for kid in sorted(kernels):
        k = kernels[kid]
        absent = [m for m in METRICS if m not in k]
        if absent:
            raise NcuError(f"kernel {kid} ({k['full_name']}) has no value for {absent}")
        result.append(KernelCounters(kid, short_kernel_name(k["full_name"]), k["full_name"], k["grid"], k["block"],
                                     k["dram__bytes_read.sum"], k["dram__bytes_write.sum"]))
    return result


def ncu_command(program: Sequence[str], cache_control: str = "all", kernel_regex: str = KERNEL_REGEX,
                launch_count: int | None = None, metrics: Sequence[str] = METRICS) -> list[str]:
    """The ``ncu`` command line that profiles ``program`` (a list of arguments)."""
    if cache_control not in ("all", "none"):
        raise ValueError(f"cache_control must be 'all' or 'none', got {cache_control!r}")
    cmd = ["ncu", "--clock-control", "none", "--cache-control", cache_control,
           "--metrics", ",".join(metrics), "--csv", "--print-units", "base",
           "--kernel-name-base", "function", "--kernel-name", kernel_regex]
    if launch_count is not None:
        cmd += ["-c", str(launch_count)]
    return cmd + list(program)


def ncu_output(command: Sequence[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``command`` (an :func:`ncu_command`) run to its end; :class:`NcuError` with ncu's last lines if it fails."""
    if not ncu_available():
        raise NcuError("ncu is not on PATH: install Nsight Compute, or read the committed results")
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-8:]
        raise NcuError(f"ncu exited with {done.returncode}: " + " | ".join(tail))
    return done


def run_ncu(program: Sequence[str], cache_control: str = "all", launch_count: int | None = None,
            timeout: float = 300, kernel_regex: str = KERNEL_REGEX) -> tuple[list[KernelCounters], str]:
    """Profile ``program`` under ncu; returns the parsed kernels and ncu's raw output."""
    done = ncu_output(ncu_command(program, cache_control, kernel_regex, launch_count), timeout)
    try:
        return parse_ncu_csv(done.stdout), done.stdout
    except NcuError as exc:  # say what ncu printed instead (e.g. that no kernel matched)
        said = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("==")][-5:]
        raise NcuError(f"{exc} ncu said: {' | '.join(said) or '(nothing)'}") from None
