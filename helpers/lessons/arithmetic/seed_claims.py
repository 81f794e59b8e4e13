"""Three claims of the series' opening page, measured instead of restated.

* **Lanes.**  "Twenty-one thousand lanes": count them, SMs x FP32 lanes per SM,
  from the device itself (:mod:`helpers.device`).
* **Idle cores.**  "The cores idle while numbers travel": Nsight Compute's SM and
  DRAM throughput as a percentage of peak, how often the schedulers issue, and the warp
  stall reasons, for the three kernels and the fused one at a size far past L2.
* **torch.compile.**  "torch.compile finds the fusion": how many GPU kernels the
  compiled expression launches (the torch profiler), against torch eager, the
  source of the Triton kernel Inductor generates, and how far its result is from
  NumPy's.

Each part is a subcommand; ``all`` runs the three and writes
``results/<device>/seed_claims.json``.  ``python -m helpers.lessons.arithmetic.seed_claims --help``.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Sequence

from helpers import results
from helpers.backend import is_simulator
from helpers.device import FP32_LANES_PER_SM, compute_capability, sm_count
from helpers.lessons.dram.ncu import KERNEL_REGEX, ncu_available, short_kernel_name
from helpers.results import Record

NCU_LOG2_SIZE = 26  # 256 MiB per array: every kernel streams from DRAM, far past the 60 MiB L2

# Asked of ncu in tiers: when a metric is unknown to the installed ncu the whole run
# fails, so each tier drops the least essential group.
THROUGHPUT_METRICS = (
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum",
)
ISSUE_METRICS = (
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
)
STALL_REASONS = ("long_scoreboard", "lg_throttle", "drain", "wait", "not_selected", "selected",
                 "no_instruction", "math_pipe_throttle", "short_scoreboard", "mio_throttle",
                 "dispatch_stall", "barrier", "branch_resolving", "membar", "misc", "sleeping", "tex_throttle")
STALL_METRICS = tuple(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS)
METRIC_TIERS = (THROUGHPUT_METRICS + ISSUE_METRICS + STALL_METRICS, THROUGHPUT_METRICS + ISSUE_METRICS[:1] + STALL_METRICS,
                THROUGHPUT_METRICS + STALL_METRICS, THROUGHPUT_METRICS)


@dataclass
class LaneCount:
    """FP32 lanes on the device: SMs x lanes per SM."""

    sm_count: int
    compute_capability: list[int]
    fp32_lanes_per_sm: int
    lanes: int


@dataclass
class KernelUse:
    """One kernel as ncu saw it: how busy the SMs and the DRAM were, and why warps waited."""

    kernel: str
    n: int
    duration_us: float | None
    sm_throughput_pct: float | None
    dram_throughput_pct: float | None
    issue_active_pct: float | None = None
    fma_pipe_pct: float | None = None
    stalls_per_issue: dict[str, float] = field(default_factory=dict)  # reason -> warps stalled per issued instruction

    def top_stall(self) -> tuple[str, float] | None:
        """The stall reason that holds the most warps, and its share of all stalls."""
        if not self.stalls_per_issue:
            return None
        total = sum(self.stalls_per_issue.values())
        reason = max(self.stalls_per_issue, key=self.stalls_per_issue.__getitem__)
        return reason, (self.stalls_per_issue[reason] / total if total else 0.0)


@dataclass
class CompileFusion:
    """What ``torch.compile`` makes of ``(a + b) * c / s``."""

    n: int
    eager_kernels: int
    compiled_kernels: int
    compiled_kernel_names: list[str]
    triton_source: str  # the generated Triton kernel, as Inductor wrote it
    max_abs_diff_vs_numpy: float
    bitwise_equal_to_numpy: bool
    max_abs_diff_eager_vs_numpy: float
    torch_version: str
    triton_version: str | None


@dataclass(kw_only=True)
class SeedClaims(Record):
    """The three measurements together; any part may be missing (``None``) with the reason in ``errors``."""

    SCHEMA: ClassVar[str] = "seed_claims"
    VERSION: ClassVar[int] = 1
    lanes: LaneCount | None
    kernels: list[KernelUse] | None
    ncu_metrics: list[str]
    compile: CompileFusion | None
    errors: dict[str, str] = field(default_factory=dict)


# --- lanes ------------------------------------------------------------------------


def count_lanes() -> LaneCount:
    """Count the FP32 lanes of the current GPU (SMs x FP32 lanes per SM of its architecture)."""
    if is_simulator():
        raise RuntimeError("the simulator has no SMs to count: run on a GPU, or read the committed result")
    cc = compute_capability()
    per_sm = FP32_LANES_PER_SM.get(cc)
    if per_sm is None:
        raise RuntimeError(f"FP32 lanes per SM unknown for compute capability {cc[0]}.{cc[1]}")
    sms = int(sm_count())  # type: ignore[arg-type]
    return LaneCount(sms, list(cc), per_sm, sms * per_sm)


# --- ncu: how busy the cores are ----------------------------------------------------


def _value(text: str) -> float | None:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_metrics_csv(text: str) -> list[dict[str, Any]]:
    """Each profiled kernel in ``ncu --csv`` output: ``{"kernel": name, "metrics": {metric: value}}``, in launch order."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise RuntimeError('no CSV header ("ID",...) in the ncu output')
    reader = csv.DictReader(io.StringIO("\n".join(ln for ln in lines[start:] if ln.startswith('"'))))
    kernels: dict[int, dict[str, Any]] = {}
    for row in reader:
        k = kernels.setdefault(int(row["ID"]), {"kernel": short_kernel_name(row["Kernel Name"]), "metrics": {}})
        k["metrics"][row["Metric Name"]] = _value(row["Metric Value"])
    return [kernels[i] for i in sorted(kernels)]


def kernel_use(kernel: str, n: int, metrics: dict[str, float | None]) -> KernelUse:
    """A :class:`KernelUse` from one kernel's ncu metrics (absent metrics stay ``None``)."""
    stalls = {r: v for r, m in zip(STALL_REASONS, STALL_METRICS) if (v := metrics.get(m)) is not None}
    duration_ns = metrics.get("gpu__time_duration.sum")
    return KernelUse(
        kernel=kernel, n=n, duration_us=None if duration_ns is None else duration_ns / 1e3,
        sm_throughput_pct=metrics.get(THROUGHPUT_METRICS[0]), dram_throughput_pct=metrics.get(THROUGHPUT_METRICS[1]),
        issue_active_pct=metrics.get(ISSUE_METRICS[0]), fma_pipe_pct=metrics.get(ISSUE_METRICS[1]),
        stalls_per_issue=stalls,
    )


def profile_kernels(log2_size: int = NCU_LOG2_SIZE, timeout: float = 55) -> tuple[list[KernelUse], list[str]]:
    """Profile the three kernels and the fused one under ncu; returns them and the metrics ncu accepted."""
    if not ncu_available():
        raise RuntimeError("ncu is not on PATH")
    deadline = time.monotonic() + timeout
    failures = []
    for metrics in METRIC_TIERS:
        with tempfile.TemporaryDirectory() as tmp:
            program = [sys.executable, "-m", "helpers.lessons.dram.ncu", "workload", "--log2-sizes", str(log2_size),
                       "--ledger", os.path.join(tmp, "ledger.json")]
            cmd = ["ncu", "--clock-control", "none", "--metrics", ",".join(metrics), "--csv", "--print-units", "base",
                   "--kernel-name-base", "function", "--kernel-name", KERNEL_REGEX, "-c", "4", *program]
            left = deadline - time.monotonic()
            if left < 5:
                break
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
        if done.returncode == 0:
            rows = parse_metrics_csv(done.stdout)
            return [kernel_use(r["kernel"], 2**log2_size, r["metrics"]) for r in rows], list(metrics)
        failures.append(" | ".join((done.stdout + done.stderr).strip().splitlines()[-3:]))
    raise RuntimeError("ncu failed for every metric set: " + " || ".join(failures))


# --- torch.compile ------------------------------------------------------------------


def _expression(a: Any, b: Any, c: Any, s: float) -> Any:
    return (a + b) * c / s


def _cuda_kernels(torch: Any, fn: Any) -> list[str]:
    """Names of the GPU kernels ``fn()`` launches, from the torch profiler."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def compile_fusion(n: int = 2**20, seed: int = 0) -> CompileFusion:
    """Compile the series' expression with ``torch.compile``; count its kernels and keep its Triton source."""
    import numpy as np
    import torch
    from torch._inductor.utils import run_and_get_code

    rng = np.random.default_rng(seed)
    host = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    s = 3.0
    a, b, c = (torch.from_numpy(x).cuda() for x in host)
    compiled = torch.compile(_expression)
    result, sources = run_and_get_code(compiled, a, b, c, s)  # compiles, runs, returns the generated code
    torch.cuda.synchronize()
    eager = _cuda_kernels(torch, lambda: _expression(a, b, c, s))
    fused = _cuda_kernels(torch, lambda: compiled(a, b, c, s))
    expected = (host[0] + host[1]) * host[2] / np.float32(s)
    got = result.cpu().numpy()
    eager_got = _expression(a, b, c, s).cpu().numpy()
    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    return CompileFusion(
        n=n, eager_kernels=len(eager), compiled_kernels=len(fused), compiled_kernel_names=fused,
        triton_source=triton_kernel_excerpt("\n".join(sources)),
        max_abs_diff_vs_numpy=float(np.max(np.abs(got - expected))),
        bitwise_equal_to_numpy=bool(np.array_equal(got, expected)),
        max_abs_diff_eager_vs_numpy=float(np.max(np.abs(eager_got - expected))),
        torch_version=torch.__version__, triton_version=triton_version,
    )


def triton_kernel_excerpt(module_source: str) -> str:
    """The ``@triton.jit`` function(s) in Inductor's generated module, without the wrapper around them."""
    lines = module_source.splitlines()
    keep: list[str] = []
    inside = header = False
    for line in lines:
        if line.startswith("@triton.jit"):
            inside = header = True
        elif inside and line and not line[0].isspace():
            if header and line.startswith("def "):
                header = False
            elif not line.startswith("@"):
                inside = False
                keep.append("")
        if inside:
            keep.append(line)
    return ("\n".join(keep).strip() or module_source.strip())[:4000]


# --- all together -------------------------------------------------------------------


def measure(parts: Sequence[str] = ("lanes", "ncu", "compile")) -> SeedClaims:
    """Measure the requested parts; a part that cannot run is recorded with its reason."""
    claims = SeedClaims(lanes=None, kernels=None, ncu_metrics=[], compile=None)
    steps = {"lanes": lambda: setattr(claims, "lanes", count_lanes()),
             "ncu": lambda: _set_ncu(claims),
             "compile": lambda: setattr(claims, "compile", compile_fusion())}
    for part in parts:
        try:
            steps[part]()
        except Exception as exc:  # noqa: BLE001 - each part fails alone, with its reason kept
            claims.errors[part] = f"{type(exc).__name__}: {exc}"
    return claims


def _set_ncu(claims: SeedClaims) -> None:
    claims.kernels, claims.ncu_metrics = profile_kernels()


def save(claims: SeedClaims, folder: Path | None = None) -> Path:
    """Write ``results/<device>/seed_claims.json`` (with the provenance of this machine)."""
    return results.save(claims, folder)


def load(folder: Path | None = None) -> SeedClaims:
    """The committed measurement (the H200's by default) as a :class:`SeedClaims`."""
    return results.load(SeedClaims, folder)


def lanes_line(lanes: LaneCount) -> str:
    """``132 SMs x 128 FP32 lanes per SM = 16,896 FP32 lanes``."""
    return f"{lanes.sm_count} SMs x {lanes.fp32_lanes_per_sm} FP32 lanes per SM = {lanes.lanes:,} FP32 lanes"


def kernels_table(kernels: Sequence[KernelUse]) -> str:
    """One line per kernel: its time, how busy the SMs and the DRAM were, how often an instruction issued, the top stall."""
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}%"

    lines = [f"{'kernel':16} {'time':>9} {'DRAM busy':>10} {'SMs busy':>9} {'issuing':>8} {'FMA pipes':>10}"
             f"  warps mostly waiting on"]
    for k in kernels:
        top = k.top_stall()
        dur = "-" if k.duration_us is None else f"{k.duration_us:.1f} us"
        lines.append(f"{k.kernel:16} {dur:>9} {pct(k.dram_throughput_pct):>10} {pct(k.sm_throughput_pct):>9} "
                     f"{pct(k.issue_active_pct):>8} {pct(k.fma_pipe_pct):>10}"
                     f"  {'-' if top is None else f'{top[0]} ({top[1]:.0%} of stalls)'}")
    lines.append("(% of each unit's peak; issuing: cycles in which a scheduler issued an instruction; "
                 "long_scoreboard: waiting for data from memory)")
    return "\n".join(lines)


def compile_lines(c: CompileFusion) -> str:
    """Kernels launched by eager torch and by torch.compile, and the compiled result against NumPy."""
    return "\n".join([
        f"torch eager launches {c.eager_kernels} GPU kernels for (a + b) * c / s; torch.compile launches "
        f"{c.compiled_kernels}: {', '.join(c.compiled_kernel_names)}",
        f"torch.compile against NumPy: bitwise equal {c.bitwise_equal_to_numpy}, largest difference {c.max_abs_diff_vs_numpy:.3g}; "
        f"torch eager: largest difference {c.max_abs_diff_eager_vs_numpy:.3g}",
        f"(torch {c.torch_version}, Triton {c.triton_version}, n = {c.n:,})",
    ])


def table(claims: SeedClaims) -> str:
    """A short printable summary of what was measured."""
    out = []
    if claims.lanes:
        out.append("lanes: " + lanes_line(claims.lanes))
    if claims.kernels:
        out.append(kernels_table(claims.kernels))
    if claims.compile:
        out.append(compile_lines(claims.compile))
    out += [f"{part} not measured: {why}" for part, why in claims.errors.items()]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m helpers.lessons.arithmetic.seed_claims {all,lanes,ncu,compile,show}``."""
    parser = argparse.ArgumentParser(prog="python -m helpers.lessons.arithmetic.seed_claims", description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=("all", "lanes", "ncu", "compile", "show"), nargs="?", default="all",
                        help="what to measure (all: the three, written to results/<device>/seed_claims.json); "
                             "show: print the committed result")
    parser.add_argument("--out", type=Path, default=None, help="also copy the JSON into this folder")
    args = parser.parse_args(argv)
    if args.part == "show":
        print(table(load()))
        return
    claims = measure(("lanes", "ncu", "compile") if args.part == "all" else (args.part,))
    print(table(claims))
    if args.part == "all":
        path = save(claims)
        print(f"wrote {path}")
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / path.name).write_text(path.read_text())


if __name__ == "__main__":
    main()
