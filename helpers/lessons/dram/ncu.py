"""The third count: DRAM bytes per kernel from Nsight Compute's hardware counters.

``ncu`` runs a Python workload, profiles the kernels whose names match a pattern,
and prints ``dram__bytes_read.sum`` and ``dram__bytes_write.sum`` as CSV.  This
module builds the command (always ``--clock-control none``: the GPU's clocks are
left alone), parses the CSV, and joins each profiled kernel with the ledger's
count of the same launch.

Two cache policies are collected, because they answer different questions:

* ``--cache-control all`` (ncu's default) flushes the caches before each profiled
  kernel.  Each kernel starts cold, as the ledger assumes; only the writes still
  dirty in L2 when the kernel ends are missing (the flush writes them back
  outside the measurement).
* ``--cache-control none`` leaves L2 as the previous kernel left it.  At sizes that
  fit in L2 the next kernel finds its input (``t1``, ``t2``) there: DRAM sees fewer
  trips than the ledger counts.

Usage on a GPU machine (writes ``results/h200/ncu_dram.json``)::

    python3 -m helpers.lessons.dram.ncu collect --log2-sizes 20,22,24,26,28

and, for the series kernels beside a few kernels of the test corpus (copies, saxpy,
float64, two stencils, a transpose, a block reduction) at one size past L2, with the
L2 kept between kernels (writes ``results/h200/ncu_corpus.json``)::

    python3 -m helpers.lessons.dram.ncu corpus --log2-n 26
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from helpers.checks import random_inputs
from helpers.counting import Comparison, compare_counts
from helpers.device import l2_bytes
from helpers.ledger import Ledger
from helpers.pipeline import (
    add_kernel,
    fused_kernel,
    multiply_kernel,
    run_fused,
    run_three_kernels,
    scale_kernel,
)
from helpers.results import Record, ResultError, load, save
from helpers.sizes import BLOCK_SIZE, blocks_for

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
PIPELINE_KERNELS = ("add_kernel", "multiply_kernel", "scale_kernel", "fused_kernel")
KERNEL_REGEX = "regex:(add|multiply|scale|fused)_kernel"
AGREEMENT = 0.03  # the ledger must be within 3% of ncu ...
LARGE = 4  # ... for arrays of at least 4x the L2 size

_UNITS = {
    "byte": 1, "bytes": 1, "B": 1,
    "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9, "Tbyte": 1e12, "TB": 1e12,
    "Kibyte": 2**10, "KiB": 2**10, "Mibyte": 2**20, "MiB": 2**20, "Gibyte": 2**30, "GiB": 2**30,
}


class NcuError(RuntimeError):
    """ncu is missing, failed, or printed something this parser does not understand."""


@dataclass
class KernelCounters:
    """One profiled kernel launch as ncu reported it."""

    id: int
    kernel: str  # the Python function's name, e.g. "add_kernel"
    full_name: str
    grid: str
    block: str
    dram_bytes_read: float
    dram_bytes_write: float

    @property
    def threads(self) -> int:
        """Threads launched, from the grid and block sizes ncu prints as "(x, y, z)"."""
        nums = [int(v) for v in re.findall(r"\d+", self.grid)] + [int(v) for v in re.findall(r"\d+", self.block)]
        total = 1
        for v in nums:
            total *= v
        return total


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


def parse_ncu_csv(text: str) -> list[KernelCounters]:
    """The profiled kernels in ``ncu --csv`` output, in launch order.

    Lines that are not CSV (``==PROF==`` messages, the workload's own prints) are
    skipped.  Columns are found by their header names, so versions that add or
    drop columns parse the same.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise NcuError('no CSV header ("ID",...) in the ncu output; was ncu run with --csv?')
    rows = [ln for ln in lines[start:] if ln.startswith('"')]
    reader = csv.DictReader(io.StringIO("\n".join(rows)))
    need = {"ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"}
    missing = need - set(reader.fieldnames or [])
    if missing:
        raise NcuError(f"ncu's CSV lacks the columns {sorted(missing)}")
    kernels: dict[int, dict[str, Any]] = {}
    for row in reader:
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
        result.append(
            KernelCounters(kid, short_kernel_name(k["full_name"]), k["full_name"], k["grid"], k["block"],
                           k["dram__bytes_read.sum"], k["dram__bytes_write.sum"])
        )
    return result


def ncu_command(program: Sequence[str], cache_control: str = "all", kernel_regex: str = KERNEL_REGEX,
                launch_count: int | None = None) -> list[str]:
    """The ``ncu`` command line that profiles ``program`` (a list of arguments)."""
    if cache_control not in ("all", "none"):
        raise ValueError(f"cache_control must be 'all' or 'none', got {cache_control!r}")
    cmd = ["ncu", "--clock-control", "none", "--cache-control", cache_control,
           "--metrics", ",".join(METRICS), "--csv", "--print-units", "base",
           "--kernel-name-base", "function", "--kernel-name", kernel_regex]
    if launch_count is not None:
        cmd += ["-c", str(launch_count)]
    return cmd + list(program)


def run_ncu(program: Sequence[str], cache_control: str = "all", launch_count: int | None = None,
            timeout: float = 300) -> tuple[list[KernelCounters], str]:
    """Profile ``program`` under ncu; returns the parsed kernels and ncu's raw output."""
    if not ncu_available():
        raise NcuError("ncu is not on PATH: install Nsight Compute, or read the committed results")
    done = subprocess.run(ncu_command(program, cache_control, launch_count=launch_count),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise NcuError(f"ncu exited with {done.returncode}: " + " | ".join(tail))
    return parse_ncu_csv(done.stdout), done.stdout


# --- the workload ncu profiles ----------------------------------------------------


def workload(log2_sizes: Sequence[int], ledger_path: str) -> None:
    """Run the three kernels and the fused kernel once per size, recording each launch in a ledger.

    The ledger's per-launch bytes go to ``ledger_path`` (JSON), in launch order, so
    they can be joined with ncu's rows.  Arrays are allocated once at the largest
    size; each size uses the leading ``n`` elements.
    """
    import numpy as np
    from numba import cuda


    largest = 2 ** max(log2_sizes)
    host = np.full(largest, 1.5, dtype=np.float32)
    big = [cuda.to_device(host) for _ in range(3)] + [cuda.device_array(largest, np.float32) for _ in range(3)]
    records = []
    for k in log2_sizes:
        n = 2**k
        a, b, c, t1, t2, out = (x[:n] for x in big)
        with Ledger(f"n=2^{k}") as ledger:
            run_three_kernels(a, b, c, 2.0, t1, t2, out)
            run_fused(a, b, c, 2.0, out)
        cuda.synchronize()
        for launch in ledger.launches:
            records.append({"n": n, "kernel": launch.kernel, "threads": launch.threads,
                            "ledger_bytes_read": launch.bytes_read, "ledger_bytes_written": launch.bytes_written})
    with open(ledger_path, "w") as f:
        json.dump(records, f)


@dataclass
class DramLaunch:
    """One launch: the ledger's bytes beside ncu's DRAM bytes, and the 3% check where it applies."""

    n: int
    kernel: str
    threads: int
    ledger_bytes_read: int
    ledger_bytes_written: int
    ncu_dram_bytes_read: float
    ncu_dram_bytes_written: float
    ratio: float  # ncu (read + written) / ledger (read + written)
    arrays_at_least_4x_l2: bool
    within_3_percent: bool | None  # None: arrays too small (or L2 size unknown) for the check


@dataclass
class NcuMode:
    """Every launch profiled under one cache policy (or why none was)."""

    command: str = ""
    launches: list[DramLaunch] = field(default_factory=list)
    ncu: list[KernelCounters] = field(default_factory=list)
    error: str | None = None


@dataclass
class WorstLaunch:
    """The launch farthest from the ledger's count under one cache policy."""

    n: int
    kernel: str
    ratio: float


@dataclass
class PolicyVerdict:
    """The 3% rule under one cache policy."""

    launches_checked: int
    passed: bool
    worst: WorstLaunch | None


@dataclass
class AgreementCheck:
    """The 3% rule, judged per cache policy; ``passed`` is the verdict with the L2 kept."""

    rule: str
    by_cache_policy: dict[str, PolicyVerdict]
    passed: bool
    note: str = ""


def join(ledger: list[dict[str, Any]], kernels: list[KernelCounters], l2_bytes: int | None) -> list[DramLaunch]:
    """One row per launch: ledger and ncu bytes side by side, and the 3% check where it applies."""
    if len(ledger) != len(kernels):
        raise NcuError(f"the ledger recorded {len(ledger)} launches but ncu profiled {len(kernels)}")
    rows = []
    for record, k in zip(ledger, kernels):
        if record["kernel"] != k.kernel or (k.grid and record["threads"] != k.threads):
            raise NcuError(f"launch order differs: ledger {record['kernel']} ({record['threads']} threads), "
                           f"ncu {k.kernel} ({k.threads} threads)")
        model = record["ledger_bytes_read"] + record["ledger_bytes_written"]
        measured = k.dram_bytes_read + k.dram_bytes_write
        large = l2_bytes is not None and record["n"] * 4 >= LARGE * l2_bytes
        rows.append(DramLaunch(
            **record,
            ncu_dram_bytes_read=k.dram_bytes_read,
            ncu_dram_bytes_written=k.dram_bytes_write,
            ratio=measured / model,
            arrays_at_least_4x_l2=large,
            within_3_percent=abs(measured / model - 1) <= AGREEMENT if large else None,
        ))
    return rows


@dataclass(kw_only=True)
class NcuDram(Record):
    """Nsight Compute's DRAM bytes per launch beside the ledger's count, per cache policy."""

    SCHEMA: ClassVar[str] = "ncu_dram"
    VERSION: ClassVar[int] = 3
    what: str
    metrics: list[str]
    l2_cache_bytes: int | None
    sizes: list[int]
    modes: dict[str, NcuMode]  # by ncu --cache-control value: "all" (flushed before each kernel), "none" (kept)
    agreement_check: AgreementCheck


def collect(log2_sizes: Sequence[int], modes: Sequence[str] = ("all", "none")) -> NcuDram:
    """Profile the workload under each cache policy and write ``results/<device>/ncu_dram.json``."""

    l2 = l2_bytes()
    by_mode: dict[str, NcuMode] = {}
    for mode in modes:
        with tempfile.TemporaryDirectory() as tmp:
            ledger_path = os.path.join(tmp, "ledger.json")
            program = [sys.executable, "-m", "helpers.lessons.dram.ncu", "workload", "--log2-sizes",
                       ",".join(map(str, log2_sizes)), "--ledger", ledger_path]
            try:
                kernels, raw = run_ncu(program, mode, launch_count=4 * len(log2_sizes))
                with open(ledger_path) as f:
                    ledger = json.load(f)
                rows = join(ledger, kernels, l2)
                by_mode[mode] = NcuMode(" ".join(ncu_command(["python3", "-m", "helpers.lessons.dram.ncu", "workload"], mode)),
                                        rows, kernels)
            except (NcuError, OSError, subprocess.TimeoutExpired) as exc:
                by_mode[mode] = NcuMode(error=str(exc))
    record = NcuDram(what="DRAM bytes per kernel launch: Nsight Compute counters against the trip ledger",
                     metrics=list(METRICS), l2_cache_bytes=l2, sizes=[2**k for k in log2_sizes], modes=by_mode,
                     agreement_check=agreement_check(by_mode))
    print(f"wrote {save(record)}")
    return record


def agreement_check(modes: dict[str, NcuMode]) -> AgreementCheck:
    """The 3% rule for arrays of at least 4x L2, judged per cache policy.

    The verdict is taken with the L2 kept between kernels (``--cache-control none``),
    the way the pipeline really runs: each kernel then pays the write-back of the dirty
    lines its predecessor left in L2, which balances the lines it leaves behind itself.
    With the L2 flushed before each kernel, up to an L2's worth of a kernel's last
    writes is still in L2 when it ends and is counted by nobody, so that policy is
    reported beside it, not used for the verdict.
    """
    per_mode = {}
    for mode, data in modes.items():
        rows = [r for r in data.launches if r.within_3_percent is not None]
        worst = max(rows, key=lambda r: abs(r.ratio - 1), default=None)
        per_mode[mode] = PolicyVerdict(
            launches_checked=len(rows),
            passed=bool(rows) and all(r.within_3_percent for r in rows),
            worst=None if worst is None else WorstLaunch(worst.n, worst.kernel, worst.ratio),
        )
    kept = per_mode.get("none")
    return AgreementCheck(
        rule="ledger bytes (read + written) within 3% of ncu DRAM bytes, per launch, arrays of at least 4x L2; "
             "verdict with the L2 kept between kernels (--cache-control none)",
        by_cache_policy=per_mode,
        passed=kept is not None and kept.passed,
    )


def load_results() -> NcuDram | None:
    """The committed H200 ncu results, or ``None`` (with a printed note) when there are none yet."""

    try:
        return load(NcuDram)
    except ResultError as exc:
        print(f"note: {exc}. The hardware count is skipped here; it is collected by scripts/gpu/04_dram.sh.")
        return None


@dataclass
class PipelineTotal:
    """One pipeline at one size: the ledger's bytes and ncu's DRAM bytes, summed over its launches."""

    n: int
    pipeline: str  # "three kernels" or "fused"
    ledger: int = 0
    ncu_read: float = 0.0
    ncu_written: float = 0.0

    @property
    def ncu(self) -> float:
        """ncu's DRAM bytes, read + written."""
        return self.ncu_read + self.ncu_written


def pipeline_totals(results: NcuDram, mode: str = "all") -> list[PipelineTotal]:
    """Per size and pipeline ("three kernels", "fused"): ledger bytes and ncu DRAM bytes summed over launches."""
    measured = results.modes.get(mode)
    totals: dict[tuple[int, str], PipelineTotal] = {}
    for r in measured.launches if measured else []:
        pipeline = "fused" if r.kernel == "fused_kernel" else "three kernels"
        t = totals.setdefault((r.n, pipeline), PipelineTotal(r.n, pipeline))
        t.ledger += r.ledger_bytes_read + r.ledger_bytes_written
        t.ncu_read += r.ncu_dram_bytes_read
        t.ncu_written += r.ncu_dram_bytes_written
    return [totals[k] for k in sorted(totals)]


def plot_dram_against_ledger(results: NcuDram) -> Any:
    """DRAM bytes measured by ncu over bytes counted by the ledger, against array size, per pipeline and cache policy."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for mode, style in (("all", "-"), ("none", "--")):
        for pipeline, marker in (("three kernels", "o"), ("fused", "s")):
            rows = [t for t in pipeline_totals(results, mode) if t.pipeline == pipeline]
            if rows:
                x = [t.n * 4 / 1e6 for t in rows]
                y = [t.ncu / t.ledger for t in rows]
                label = f"{pipeline}, L2 {'flushed before each kernel' if mode == 'all' else 'kept between kernels'}"
                _ = ax.plot(x, y, style, marker=marker, label=label)
    if results.l2_cache_bytes:
        _ = ax.axvline(results.l2_cache_bytes / 1e6, color="grey", lw=0.8)
        _ = ax.text(results.l2_cache_bytes / 1e6, 0.05, " L2 size", color="grey")
    _ = ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.2)
    ax.set_xlabel("one array (MB)")
    ax.set_ylabel("ncu DRAM bytes / ledger bytes")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def pipeline_comparisons(n: int, seed: int = 0) -> list[Comparison]:
    """Both counts for every launch of the three-kernel and the fused pipeline at size ``n``."""
    from numba import cuda

    a, b, c = (cuda.to_device(x) for x in random_inputs(n, count=3, seed=seed))
    t1, t2, out = (cuda.device_array(n, dtype=np.float32) for _ in range(3))
    s = np.float32(2.5)
    grid = blocks_for(n)
    launches = [
        (add_kernel, (a, b, t1), ("a", "b", "t1")),
        (multiply_kernel, (t1, c, t2), ("t1", "c", "t2")),
        (scale_kernel, (t2, s, out), ("t2", "s", "out")),
        (fused_kernel, (a, b, c, s, out), ("a", "b", "c", "s", "out")),
    ]
    return [compare_counts(k, grid, BLOCK_SIZE, args, names) for k, args, names in launches]


def three_way_table(comparisons: Sequence[Comparison], n_small: int, results: NcuDram, sizes: Sequence[int] | None = None) -> str:
    """The three counts side by side, per pipeline, in MB, at the sizes ncu measured.

    * PTX: the ledger's count on the GPU at that size (from the compiled code);
    * simulator: bytes per element counted at ``n_small``, times n;
    * ncu: DRAM bytes, with L2 flushed before each kernel and with L2 kept.
    """
    per_element = {
        "three kernels": sum(c.simulated.bytes_read + c.simulated.bytes_written for c in comparisons if c.kernel != "fused_kernel") / n_small,
        "fused": sum(c.simulated.bytes_read + c.simulated.bytes_written for c in comparisons if c.kernel == "fused_kernel") / n_small,
    }
    kept = {(t.n, t.pipeline): t for t in pipeline_totals(results, "none")}
    rows = [("n", "pipeline", "PTX MB", "simulator MB", "ncu MB (flushed)", "ncu MB (L2 kept)")]
    for t in pipeline_totals(results, "all"):
        if sizes is not None and t.n not in sizes:
            continue
        k = kept.get((t.n, t.pipeline))
        rows.append((
            f"2^{t.n.bit_length() - 1}",
            t.pipeline,
            f"{t.ledger / 1e6:.1f}",
            f"{per_element[t.pipeline] * t.n / 1e6:.1f}",
            f"{t.ncu / 1e6:.1f}",
            f"{k.ncu / 1e6:.1f}" if k else "-",
        ))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in rows)


# --- the corpus: series kernels and a few student-written shapes beside ncu ----------------

CORPUS_RESULT_NAME = "ncu_corpus"
CORPUS_SHAPES_FILE = os.path.join("tests", "corpus", "shapes.py")
SERIES_KERNELS = ("add_kernel", "multiply_kernel", "scale_kernel", "fused_kernel")


def load_shapes(path: str = CORPUS_SHAPES_FILE) -> Any:
    """The corpus module (kernel shapes and how to launch them), loaded from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("corpus_shapes", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no corpus of kernel shapes at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_shapes"] = module
    spec.loader.exec_module(module)
    return module


def corpus_workload(n: int, ledger_path: str, shapes_file: str = CORPUS_SHAPES_FILE) -> None:
    """Run the series pipelines and the corpus shapes marked ``ncu`` once at size ``n``, each in a ledger.

    Writes, in launch order, each launch's ledger bytes (or why it was not counted).
    """
    from numba import cuda

    shapes = [s for s in load_shapes(shapes_file).SHAPES if s.ncu]
    rng = np.random.default_rng(0)
    records = []

    def record(ledger: Ledger, shape: str) -> None:
        for launch in ledger.launches:
            entry: dict[str, Any] = {"n": n, "shape": shape, "kernel": launch.kernel, "threads": launch.threads}
            if launch.uncounted is None:
                entry.update(ledger_bytes_read=launch.bytes_read, ledger_bytes_written=launch.bytes_written,
                             uncounted=None)
            else:
                entry.update(ledger_bytes_read=None, ledger_bytes_written=None, uncounted=launch.uncounted)
            records.append(entry)

    a, b, c = (cuda.to_device(x) for x in random_inputs(n, count=3, seed=0))
    t1, t2, out = (cuda.device_array(n, np.float32) for _ in range(3))
    with Ledger("three kernels") as three:
        run_three_kernels(a, b, c, 2.0, t1, t2, out)
    cuda.synchronize()
    record(three, "series: three kernels")
    with Ledger("fused") as fused:
        run_fused(a, b, c, 2.0, out)
    cuda.synchronize()
    record(fused, "series: fused")
    del a, b, c, t1, t2, out
    for shape in shapes:
        args = [cuda.to_device(v) if isinstance(v, np.ndarray) else v for v in shape.make(n, rng)]
        grid, block = shape.launch(n)
        with Ledger(shape.name) as ledger:
            shape.kernel[grid, block](*args)
        cuda.synchronize()
        record(ledger, shape.name)
        del args
    with open(ledger_path, "w") as f:
        json.dump(records, f)


@dataclass
class CorpusLaunch:
    """One launch of the corpus run: the ledger's bytes (or why it has none) beside ncu's DRAM bytes."""

    n: int
    shape: str
    kernel: str
    threads: int
    ledger_bytes_read: int | None
    ledger_bytes_written: int | None
    uncounted: str | None
    ncu_dram_bytes_read: float
    ncu_dram_bytes_written: float
    ratio: float | None  # ncu (read + written) / ledger (read + written)


@dataclass(kw_only=True)
class NcuCorpus(Record):
    """The series kernels and a few corpus shapes at one large size: ledger against ncu's DRAM bytes."""

    SCHEMA: ClassVar[str] = "ncu_corpus"
    VERSION: ClassVar[int] = 1
    what: str
    metrics: list[str]
    l2_cache_bytes: int | None
    n: int
    cache_control: str
    command: str = ""
    launches: list[CorpusLaunch] = field(default_factory=list)
    error: str | None = None


def join_corpus(ledger: list[dict[str, Any]], kernels: list[KernelCounters]) -> list[CorpusLaunch]:
    """One row per launch: the ledger's bytes (or its refusal) beside ncu's DRAM bytes."""
    if len(ledger) != len(kernels):
        raise NcuError(f"the ledger recorded {len(ledger)} launches but ncu profiled {len(kernels)}")
    rows = []
    for record, k in zip(ledger, kernels):
        if record["kernel"] != k.kernel:
            raise NcuError(f"launch order differs: ledger {record['kernel']}, ncu {k.kernel}")
        measured = k.dram_bytes_read + k.dram_bytes_write
        counted = record["uncounted"] is None
        model = record["ledger_bytes_read"] + record["ledger_bytes_written"] if counted else None
        rows.append(CorpusLaunch(**record, ncu_dram_bytes_read=k.dram_bytes_read,
                                 ncu_dram_bytes_written=k.dram_bytes_write,
                                 ratio=measured / model if model else None))
    return rows


def corpus_kernel_regex(shapes_file: str = CORPUS_SHAPES_FILE) -> str:
    """ncu's ``--kernel-name`` for the corpus run: unanchored, since ncu's function names carry
    Numba's suffix (``add_kernel[v1,cw51...](Array<float, ...>)``)."""
    names = sorted({*SERIES_KERNELS, *(getattr(s.kernel, "py_func", None).__name__ if hasattr(s.kernel, "py_func")
                                       else s.kernel.__name__ for s in load_shapes(shapes_file).SHAPES if s.ncu)})
    return "regex:(" + "|".join(names) + ")"


def collect_corpus(log2_n: int = 26, shapes_file: str = CORPUS_SHAPES_FILE, out_dir: str | None = None) -> NcuCorpus:
    """Profile the corpus workload with the L2 kept between kernels; write ``results/<device>/ncu_corpus.json``."""
    n = 2**log2_n
    regex = corpus_kernel_regex(shapes_file)
    record = NcuCorpus(what="DRAM bytes per launch (Nsight Compute, L2 kept between kernels) beside the trip "
                            "ledger's count", metrics=list(METRICS), l2_cache_bytes=l2_bytes(), n=n,
                       cache_control="none")
    with tempfile.TemporaryDirectory() as tmp:
        ledger_path = os.path.join(tmp, "ledger.json")
        program = [sys.executable, "-m", "helpers.lessons.dram.ncu", "corpus-workload", "--log2-n", str(log2_n),
                   "--shapes", shapes_file, "--ledger", ledger_path]
        try:
            if not ncu_available():
                raise NcuError("ncu is not on PATH")
            cmd = ncu_command(program, "none", kernel_regex=regex)
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                tail = (done.stdout + done.stderr).strip().splitlines()[-8:]
                raise NcuError(f"ncu exited with {done.returncode}: " + " | ".join(tail))
            try:
                kernels = parse_ncu_csv(done.stdout)
            except NcuError as exc:  # say what ncu printed instead (e.g. that no kernel matched)
                tail = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("==")][-5:]
                raise NcuError(f"{exc} ncu said: {' | '.join(tail) or '(nothing)'}") from None
            with open(ledger_path) as f:
                ledger = json.load(f)
            record.command = " ".join(cmd[:-len(program)] + ["python3", "-m", "helpers.lessons.dram.ncu", "corpus-workload"])
            record.launches = join_corpus(ledger, kernels)
        except (NcuError, OSError, subprocess.TimeoutExpired, ValueError) as exc:
            record.error = str(exc)
    path = save(record)
    print(f"wrote {path}")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        shutil.copy(path, os.path.join(out_dir, os.path.basename(path)))
    print(corpus_table(record))
    return record


def load_corpus_results() -> NcuCorpus | None:
    """The committed H200 corpus measurement, or ``None`` (with a printed note) when there is none yet."""
    try:
        return load(NcuCorpus)
    except ResultError as exc:
        print(f"note: {exc}. It is measured by scripts/gpu/04_dram_corpus.sh.")
        return None


def corpus_table(record: NcuCorpus) -> str:
    """The ledger's bytes beside ncu's DRAM bytes, in MB, one row per launch."""
    if record.error:
        return f"no ncu measurement: {record.error}"
    rows = [("shape", "kernel", "ledger MB", "ncu MB", "ncu / ledger")]
    for r in record.launches:
        measured = (r.ncu_dram_bytes_read + r.ncu_dram_bytes_written) / 1e6
        if r.uncounted is None:
            model = (r.ledger_bytes_read + r.ledger_bytes_written) / 1e6
            rows.append((r.shape, r.kernel, f"{model:.1f}", f"{measured:.1f}",
                         f"{r.ratio:.3f}" if r.ratio is not None else "-"))
        else:
            rows.append((r.shape, r.kernel, "not counted", f"{measured:.1f}", "-"))
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m helpers.lessons.dram.ncu", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("collect", "workload"):
        p = sub.add_parser(name)
        p.add_argument("--log2-sizes", default="20,22,24,26,28", help="comma-separated powers of two")
        if name == "workload":
            p.add_argument("--ledger", required=True, help="where to write the ledger's launches (JSON)")
        else:
            p.add_argument("--modes", default="all,none", help="ncu --cache-control values to collect")
    p = sub.add_parser("corpus", help="series kernels and corpus shapes at one large size, beside ncu")
    p.add_argument("--log2-n", type=int, default=26, help="elements per array, as a power of two")
    p.add_argument("--shapes", default=CORPUS_SHAPES_FILE, help="the corpus file of kernel shapes")
    p.add_argument("--out", default=None, help="also copy the result JSON into this folder")
    p = sub.add_parser("corpus-workload", help="(run by `corpus` under ncu)")
    p.add_argument("--log2-n", type=int, default=26)
    p.add_argument("--shapes", default=CORPUS_SHAPES_FILE)
    p.add_argument("--ledger", required=True)
    args = parser.parse_args(argv)
    if args.command == "corpus":
        collect_corpus(args.log2_n, args.shapes, args.out)
        return
    if args.command == "corpus-workload":
        corpus_workload(2**args.log2_n, args.ledger, args.shapes)
        return
    sizes = [int(k) for k in args.log2_sizes.split(",")]
    if args.command == "workload":

        workload(sizes, args.ledger)
    else:

        result = collect(sizes, args.modes.split(","))
        print(json.dumps(asdict(result.agreement_check)))


if __name__ == "__main__":
    main()
