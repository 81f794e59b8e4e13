"""The third count: DRAM bytes per kernel from Nsight Compute's hardware counters, beside the ledger's.

ncu runs :func:`workload` (the series' pipelines, and with ``--shapes`` a few corpus kernels,
each in a ledger); :func:`profile` joins every profiled kernel with the ledger's count of it.

* ``collect`` (``ncu_dram.json``): both pipelines at several sizes under two cache policies.
  ``--cache-control all`` flushes the caches before each kernel, so each starts cold as the
  ledger assumes (only the writes still dirty in L2 at its end are missed); ``none`` leaves L2
  as the previous kernel left it, so at sizes that fit the next kernel finds ``t1``, ``t2`` there.
* ``corpus`` (``ncu_corpus.json``): the series kernels beside the corpus shapes marked ``ncu``
  at one size past L2, with the L2 kept between kernels.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from typing import Any, Sequence

import numpy as np
from numba import cuda

from helpers.checks import random_inputs
from helpers.counting import Comparison, compare_counts
from helpers.device import l2_bytes
from helpers.harness.cli import Command
from helpers.ledger import Ledger
from helpers.lessons.dram.ncu import KERNEL_REGEX, METRICS, NcuError, ncu_command, run_ncu
from helpers.lessons.dram.record import (AgreementCheck, CorpusLaunch, DramLaunch, KernelCounters, NcuCorpus, NcuDram,
                                         NcuMode, PolicyVerdict, WorstLaunch)
from helpers.lessons.dram.report import corpus_table
from helpers.pipeline import add_kernel, fused_kernel, multiply_kernel, run_fused, run_three_kernels, scale_kernel
from helpers.sizes import BLOCK_SIZE, blocks_for

PIPELINE_KERNELS = ("add_kernel", "multiply_kernel", "scale_kernel", "fused_kernel")
CORPUS_SHAPES_FILE = os.path.join("tests", "corpus", "shapes.py")
AGREEMENT = 0.03  # the ledger must be within 3% of ncu ...
LARGE = 4  # ... for arrays of at least 4x the L2 size
ENTRY_POINT = ("-m", "helpers.lessons.dram", "workload")


def load_shapes(path: str = CORPUS_SHAPES_FILE) -> Any:
    """The corpus module (kernel shapes and how to launch them), loaded from its file."""
    spec = importlib.util.spec_from_file_location("corpus_shapes", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no corpus of kernel shapes at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_shapes"] = module
    spec.loader.exec_module(module)
    return module


def _entries(ledger: Ledger, n: int, shape: str) -> list[dict[str, Any]]:
    """Each launch of ``ledger``: its kernel and threads, and the ledger's bytes (or why it has none)."""
    entries = []
    for launch in ledger.launches:
        counted = launch.uncounted is None
        entries.append({"n": n, "shape": shape, "kernel": launch.kernel, "threads": launch.threads,
                        "ledger_bytes_read": launch.bytes_read if counted else None,
                        "ledger_bytes_written": launch.bytes_written if counted else None,
                        "uncounted": launch.uncounted})
    return entries


def _corpus_entries(n: int, shapes_file: str) -> list[dict[str, Any]]:
    """The corpus shapes marked ``ncu``, each launched once at size ``n`` in a ledger of its own."""
    rng = np.random.default_rng(0)
    entries = []
    for shape in (s for s in load_shapes(shapes_file).SHAPES if s.ncu):
        args = [cuda.to_device(v) if isinstance(v, np.ndarray) else v for v in shape.make(n, rng)]
        grid, block = shape.launch(n)
        with Ledger(shape.name) as ledger:
            shape.kernel[grid, block](*args)
        cuda.synchronize()
        entries += _entries(ledger, n, shape.name)
        del args
    return entries


def workload(sizes: Sequence[int], ledger_path: str, shapes_file: str | None = None) -> None:
    """Both pipelines once per size, then (with ``shapes_file``) the corpus shapes marked ``ncu`` at the largest,
    each launch's ledger entry written to ``ledger_path`` (JSON) in launch order, to join with ncu's rows."""
    largest = max(sizes)
    arrays = [cuda.to_device(x) for x in random_inputs(largest, count=3, seed=0)]
    arrays += [cuda.device_array(largest, np.float32) for _ in range(3)]
    entries: list[dict[str, Any]] = []
    for n in sizes:
        a, b, c, t1, t2, out = (x[:n] for x in arrays)
        with Ledger("three kernels") as three:
            run_three_kernels(a, b, c, 2.0, t1, t2, out)
        with Ledger("fused") as fused:
            run_fused(a, b, c, 2.0, out)
        cuda.synchronize()
        entries += _entries(three, n, "series: three kernels") + _entries(fused, n, "series: fused")
    del a, b, c, t1, t2, out, arrays
    if shapes_file is not None:
        entries += _corpus_entries(largest, shapes_file)
    with open(ledger_path, "w") as f:
        json.dump(entries, f)


def corpus_kernel_regex(shapes_file: str = CORPUS_SHAPES_FILE) -> str:
    """ncu's ``--kernel-name`` for the corpus run (unanchored: ncu's names carry Numba's suffixes)."""
    names = sorted({*PIPELINE_KERNELS, *(getattr(s.kernel, "py_func", s.kernel).__name__
                                         for s in load_shapes(shapes_file).SHAPES if s.ncu)})
    return "regex:(" + "|".join(names) + ")"


def join(ledger: list[dict[str, Any]], kernels: list[KernelCounters]) -> list[tuple[dict[str, Any], KernelCounters]]:
    """Each launch's ledger entry beside ncu's row for it; :class:`NcuError` if the launches differ."""
    if len(ledger) != len(kernels):
        raise NcuError(f"the ledger recorded {len(ledger)} launches but ncu profiled {len(kernels)}")
    for entry, k in zip(ledger, kernels):
        if entry["kernel"] != k.kernel or (k.grid and entry["threads"] != k.threads):
            raise NcuError(f"launch order differs: ledger {entry['kernel']} ({entry['threads']} threads), "
                           f"ncu {k.kernel} ({k.threads} threads)")
    return list(zip(ledger, kernels))


def dram_launches(pairs: list[tuple[dict[str, Any], KernelCounters]], l2: int | None) -> list[DramLaunch]:
    """One row per launch of the series' pipelines, with the 3% check where the arrays are large."""
    rows = []
    for entry, k in pairs:
        model = entry["ledger_bytes_read"] + entry["ledger_bytes_written"]
        measured = k.dram_bytes_read + k.dram_bytes_write
        large = l2 is not None and entry["n"] * 4 >= LARGE * l2
        rows.append(DramLaunch(
            n=entry["n"], kernel=entry["kernel"], threads=entry["threads"],
            ledger_bytes_read=entry["ledger_bytes_read"], ledger_bytes_written=entry["ledger_bytes_written"],
            ncu_dram_bytes_read=k.dram_bytes_read, ncu_dram_bytes_written=k.dram_bytes_write,
            ratio=measured / model, arrays_at_least_4x_l2=large,
            within_3_percent=abs(measured / model - 1) <= AGREEMENT if large else None,
        ))
    return rows


def corpus_launches(pairs: list[tuple[dict[str, Any], KernelCounters]]) -> list[CorpusLaunch]:
    """One row per launch of the corpus run: the ledger's bytes (or its refusal) beside ncu's."""
    rows = []
    for entry, k in pairs:
        measured = k.dram_bytes_read + k.dram_bytes_write
        model = None if entry["uncounted"] is not None else entry["ledger_bytes_read"] + entry["ledger_bytes_written"]
        rows.append(CorpusLaunch(**entry, ncu_dram_bytes_read=k.dram_bytes_read,
                                 ncu_dram_bytes_written=k.dram_bytes_write,
                                 ratio=measured / model if model else None))
    return rows


def profile(log2_sizes: Sequence[int], cache_control: str, shapes_file: str | None = None,
            launch_count: int | None = None, timeout: float = 300) -> tuple[str, list[tuple[dict[str, Any], KernelCounters]]]:
    """The workload under ncu with one cache policy: the command, and each launch's ledger entry beside ncu's row."""
    regex = KERNEL_REGEX if shapes_file is None else corpus_kernel_regex(shapes_file)
    options = ["--log2-sizes", ",".join(map(str, log2_sizes))] + (["--shapes", shapes_file] if shapes_file else [])
    with tempfile.TemporaryDirectory() as tmp:
        ledger_path = os.path.join(tmp, "ledger.json")
        program = [sys.executable, *ENTRY_POINT, *options, "--ledger", ledger_path]
        kernels, _ = run_ncu(program, cache_control, launch_count, timeout, regex)
        with open(ledger_path) as f:
            ledger = json.load(f)
    command = ncu_command(["python3", *ENTRY_POINT, *options], cache_control, regex, launch_count)
    return " ".join(command), join(ledger, kernels)


def agreement_check(modes: dict[str, NcuMode]) -> AgreementCheck:
    """The 3% rule for arrays of at least 4x L2, judged per cache policy.

    The verdict is taken with the L2 kept between kernels, as the pipeline runs: each kernel pays the
    write-back of the dirty lines its predecessor left, which balances those it leaves itself.  Flushed,
    up to an L2's worth of a kernel's last writes is counted by nobody, so that policy is only reported.
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


def collect(log2_sizes: Sequence[int], modes: Sequence[str] = ("all", "none")) -> NcuDram:
    """The series' pipelines at each size, profiled under each cache policy (a policy that fails keeps its reason)."""
    l2 = l2_bytes()
    by_mode: dict[str, NcuMode] = {}
    for mode in modes:
        try:
            command, pairs = profile(log2_sizes, mode, launch_count=4 * len(log2_sizes))
            by_mode[mode] = NcuMode(command, dram_launches(pairs, l2), [k for _, k in pairs])
        except (NcuError, OSError, subprocess.TimeoutExpired) as exc:
            by_mode[mode] = NcuMode(error=str(exc))
    return NcuDram(what="DRAM bytes per kernel launch: Nsight Compute counters against the trip ledger",
                   metrics=list(METRICS), l2_cache_bytes=l2, sizes=[2**k for k in log2_sizes], modes=by_mode,
                   agreement_check=agreement_check(by_mode))


def collect_corpus(log2_n: int = 26, shapes_file: str = CORPUS_SHAPES_FILE) -> NcuCorpus:
    """The series kernels and the corpus shapes at one size, with the L2 kept between kernels."""
    record = NcuCorpus(what="DRAM bytes per launch (Nsight Compute, L2 kept between kernels) beside the trip "
                            "ledger's count", metrics=list(METRICS), l2_cache_bytes=l2_bytes(), n=2**log2_n,
                       cache_control="none")
    try:
        record.command, pairs = profile([log2_n], "none", shapes_file=shapes_file, timeout=600)
        record.launches = corpus_launches(pairs)
    except (NcuError, OSError, subprocess.TimeoutExpired, ValueError) as exc:
        record.error = str(exc)
    return record


def pipeline_comparisons(n: int, seed: int = 0) -> list[Comparison]:
    """Both counts (PTX and simulator) for every launch of the three-kernel and the fused pipeline at size ``n``."""
    a, b, c = (cuda.to_device(x) for x in random_inputs(n, count=3, seed=seed))
    t1, t2, out = (cuda.device_array(n, dtype=np.float32) for _ in range(3))
    s = np.float32(2.5)
    launches = [
        (add_kernel, (a, b, t1), ("a", "b", "t1")),
        (multiply_kernel, (t1, c, t2), ("t1", "c", "t2")),
        (scale_kernel, (t2, s, out), ("t2", "s", "out")),
        (fused_kernel, (a, b, c, s, out), ("a", "b", "c", "s", "out")),
    ]
    return [compare_counts(k, blocks_for(n), BLOCK_SIZE, args, names) for k, args, names in launches]


def _log2_sizes(text: str) -> list[int]:
    try:
        return [int(k) for k in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--log2-sizes takes powers of two separated by commas, such as "
                                         f"20,22,24; got {text!r}") from None


def _collect(args: argparse.Namespace) -> NcuDram:
    record = collect(args.log2_sizes, args.modes.split(","))
    print(json.dumps(asdict(record.agreement_check)))
    return record


def _corpus(args: argparse.Namespace) -> NcuCorpus:
    record = collect_corpus(args.log2_n, args.shapes)
    print(corpus_table(record))
    return record


def _workload(args: argparse.Namespace) -> int:
    workload([2**k for k in args.log2_sizes], args.ledger, args.shapes)
    return 0


def _sizes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log2-sizes", type=_log2_sizes, default=[20, 22, 24, 26, 28],
                        help="comma-separated powers of two (default 20,22,24,26,28)")


COMMANDS = [
    Command("collect", "the three kernels and the fused kernel at several sizes, under two cache policies "
            "(ncu_dram.json)", _collect,
            lambda p: (_sizes_option(p), p.add_argument("--modes", default="all,none",
                                                        help="ncu --cache-control values to collect"))),
    Command("corpus", "series kernels and corpus shapes at one large size, beside ncu (ncu_corpus.json)", _corpus,
            lambda p: (p.add_argument("--log2-n", type=int, default=26, help="elements per array, a power of two"),
                       p.add_argument("--shapes", default=CORPUS_SHAPES_FILE, help="the corpus file of kernel shapes"))),
    Command("workload", "the launches ncu profiles (run by collect and corpus under ncu)", _workload,
            lambda p: (_sizes_option(p), p.add_argument("--ledger", required=True,
                                                        help="where to write the ledger's launches (JSON)"),
                       p.add_argument("--shapes", default=None, help="also the corpus shapes of this file"))),
]
