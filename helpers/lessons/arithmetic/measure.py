"""Three claims of the series' opening page, measured instead of restated.

* **Lanes**: SMs x FP32 lanes per SM, from the device itself.
* **Idle cores**: Nsight Compute's SM and DRAM throughput, issue rate and warp stall reasons
  for the three kernels and the fused one at a size far past L2.
* **torch.compile**: how many kernels the compiled expression launches against torch eager,
  the Triton source Inductor generates, and how far its result is from NumPy's.

``all`` runs the three and writes ``seed_claims.json``; ``sweep`` times notebook 02's FMA sweep and writes
``fma_sweep.json``, which the notebook shows where there is no GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any, Callable, Sequence

import numpy as np
from numba import cuda

from helpers import checks, timing
from helpers.backend import is_simulator
from helpers.device import (FP32_LANES_PER_SM, compute_capability, datasheet_bandwidth_gbs, knee_fmas_per_element,
                            peak_fp32_flops, sm_count)
from helpers.harness.cli import Command
from helpers.harness.peers import require_gpu, require_gpu_module, torch_compile
from helpers.lessons.arithmetic.kernels import fma_chain_kernel, fma_chain_reference
from helpers.lessons.arithmetic.record import CompileFusion, FmaSweep, KernelUse, LaneCount, SeedClaims
from helpers.lessons.arithmetic.report import summary, sweep_lines
from helpers.lessons.dram.ncu import (KERNEL_REGEX, NcuError, csv_rows, ncu_available, ncu_command, ncu_output,
                                      short_kernel_name)
from helpers.results import load
from helpers.sizes import BLOCK_SIZE, blocks_for, default_size

NCU_LOG2_SIZE = 26  # 256 MiB per array: every kernel streams from DRAM, far past the 60 MiB L2

# Asked of ncu in tiers: when a metric is unknown to the installed ncu the whole run
# fails, so each tier drops the least essential group.
THROUGHPUT_METRICS = ("sm__throughput.avg.pct_of_peak_sustained_elapsed",
                      "dram__throughput.avg.pct_of_peak_sustained_elapsed", "gpu__time_duration.sum")
ISSUE_METRICS = ("smsp__issue_active.avg.pct_of_peak_sustained_active",
                 "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active")
STALL_REASONS = ("long_scoreboard", "lg_throttle", "drain", "wait", "not_selected", "selected",
                 "no_instruction", "math_pipe_throttle", "short_scoreboard", "mio_throttle",
                 "dispatch_stall", "barrier", "branch_resolving", "membar", "misc", "sleeping", "tex_throttle")
STALL_METRICS = tuple(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS)
METRIC_TIERS = (THROUGHPUT_METRICS + ISSUE_METRICS + STALL_METRICS, THROUGHPUT_METRICS + ISSUE_METRICS[:1] + STALL_METRICS,
                THROUGHPUT_METRICS + STALL_METRICS, THROUGHPUT_METRICS)
PARTS = ("lanes", "ncu", "compile")
SWEEP_ROUNDS = tuple(2**k for k in range(9))  # 8 to 2,048 FMAs per element


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


def _value(text: str) -> float | None:
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return None


def parse_metrics_csv(text: str) -> list[dict[str, Any]]:
    """Each profiled kernel in ``ncu --csv`` output: ``{"kernel": name, "metrics": {metric: value}}``, in launch order."""
    kernels: dict[int, dict[str, Any]] = {}
    for row in csv_rows(text):
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
        left = deadline - time.monotonic()
        if left < 5:
            break
        with tempfile.TemporaryDirectory() as tmp:
            program = [sys.executable, "-m", "helpers.lessons.dram", "workload", "--log2-sizes", str(log2_size),
                       "--ledger", os.path.join(tmp, "ledger.json")]
            try:
                done = ncu_output(ncu_command(program, "all", KERNEL_REGEX, 4, metrics), timeout=left)
            except NcuError as exc:
                failures.append(str(exc))
                continue
        rows = parse_metrics_csv(done.stdout)
        return [kernel_use(r["kernel"], 2**log2_size, r["metrics"]) for r in rows], list(metrics)
    raise RuntimeError("ncu failed for every metric set: " + " || ".join(failures))


def _expression(a: Any, b: Any, c: Any, s: float) -> Any:
    return (a + b) * c / s


def _cuda_kernels(torch: Any, fn: Callable[[], Any]) -> list[str]:  # from the torch profiler
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def compile_fusion(n: int = 2**20, seed: int = 0) -> CompileFusion:
    """torch.compile of the series' expression (one size): its kernels, its Triton source, its error."""
    torch = require_gpu_module("torch")
    from torch._inductor.utils import run_and_get_code  # torch is optional: imported only once it is there

    rng = np.random.default_rng(seed)
    host = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    s = 3.0
    a, b, c = (torch.from_numpy(x).cuda() for x in host)
    compiled = torch_compile(_expression, dynamic=False)
    print(f"compiled with {compiled.description}")
    result, sources = run_and_get_code(compiled, a, b, c, s)  # compiles, runs, returns the generated code
    torch.cuda.synchronize()
    eager = _cuda_kernels(torch, lambda: _expression(a, b, c, s))
    fused = _cuda_kernels(torch, lambda: compiled(a, b, c, s))
    expected = (host[0] + host[1]) * host[2] / np.float32(s)
    got = result.cpu().numpy()
    eager_got = _expression(a, b, c, s).cpu().numpy()
    try:
        import triton  # Triton comes with torch on a GPU; its version is recorded when it is there

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
        bitwise_equal_to_eager=bool(np.array_equal(got, eager_got)),
    )


def triton_kernel_excerpt(module_source: str) -> str:
    """The ``@triton.jit`` function(s) in Inductor's generated module, without the wrapper around them."""
    keep: list[str] = []
    inside = header = False
    for line in module_source.splitlines():
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


def _set_ncu(claims: SeedClaims) -> None:
    claims.kernels, claims.ncu_metrics = profile_kernels()


def measure(parts: Sequence[str] = PARTS) -> SeedClaims:
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


def sweep_fmas(n: int | None = None, repeats: int = 20, kernel: Any = fma_chain_kernel) -> FmaSweep:
    """Time ``kernel`` (notebook 02's ``fma_chain_kernel``, or a learner's edit of it) at 8 x ``rounds`` FMAs per
    element for each of :data:`SWEEP_ROUNDS`, on ``n`` elements (the GPU's default size plus 3, as notebook 02),
    after checking one round against NumPy."""
    require_gpu("the FMA sweep (it times kernels)")
    n = n or default_size() + 3
    x = checks.random_inputs(n)[0]
    dx, out = cuda.to_device(x), cuda.to_device(checks.poisoned(n))
    blocks = blocks_for(n)
    kernel[blocks, BLOCK_SIZE](dx, out, 1)
    checks.check_close(out, fma_chain_reference(x, 8), rtol=1e-5)
    timed = [timing.time_gpu(lambda r=rounds: kernel[blocks, BLOCK_SIZE](dx, out, r), repeats=repeats)
             for rounds in SWEEP_ROUNDS]
    bandwidth_gbs = datasheet_bandwidth_gbs() or timing.copy_bandwidth(n)[1]  # as notebook 02: the bound, else the copy
    peak = peak_fp32_flops()
    return FmaSweep(n=n, fmas=[8 * r for r in SWEEP_ROUNDS], median_ms=[t.median_ms for t in timed],
                    iqr_ms=[t.spread_ms for t in timed], repeats=repeats, bandwidth_gbs=bandwidth_gbs,
                    peak_flops=peak, memory_floor_ms=8 * n / (bandwidth_gbs * 1e9) * 1e3,
                    ms_per_fma=2 * n / peak * 1e3, knee_fmas=knee_fmas_per_element(peak, bandwidth_gbs * 1e9, 8))


def _printed(claims: Callable[[], SeedClaims], keep: bool = False) -> Callable[[argparse.Namespace], SeedClaims | int]:
    """A command that prints ``claims()``'s summary, and returns the record to write when it should ``keep`` it."""
    def run(args: argparse.Namespace) -> SeedClaims | int:
        made = claims()
        print(summary(made))
        return made if keep else 0

    return run


COMMANDS = [
    Command("all", "the three parts, written to results/<device>/seed_claims.json", _printed(measure, keep=True)),
    Command("lanes", "count the FP32 lanes (printed, not written)", _printed(lambda: measure(("lanes",)))),
    Command("ncu", "how busy the SMs and the DRAM are, under ncu (printed, not written)",
            _printed(lambda: measure(("ncu",)))),
    Command("compile", "what torch.compile makes of the expression (printed, not written)",
            _printed(lambda: measure(("compile",)))),
    Command("show", "print the committed result", _printed(lambda: load(SeedClaims))),
    Command("sweep", "notebook 02's FMA sweep, written to results/<device>/fma_sweep.json",
            lambda args: _sweep_printed(), check=lambda args: _on_a_gpu("the FMA sweep times kernels")),
]


def _sweep_printed() -> FmaSweep:
    sweep = sweep_fmas()
    print("\n".join(sweep_lines(sweep)))
    return sweep


def _on_a_gpu(what: str) -> None:
    """A usage error in the simulator, saying that ``what`` needs a GPU."""
    if is_simulator():
        raise ValueError(f"{what}: run it on a GPU (this is the simulator)")
