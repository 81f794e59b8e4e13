"""What notebooks 02 and 03 print of the seed's claims: the lanes, how busy each kernel kept the GPU, torch.compile."""

from __future__ import annotations

from typing import Sequence

from helpers.harness.tables import table
from helpers.timing import format_ms
from helpers.lessons.arithmetic.record import CompileFusion, FmaSweep, KernelUse, LaneCount, SeedClaims


def lanes_line(lanes: LaneCount) -> str:
    """``132 SMs x 128 FP32 lanes per SM = 16,896 FP32 lanes``."""
    return f"{lanes.sm_count} SMs x {lanes.fp32_lanes_per_sm} FP32 lanes per SM = {lanes.lanes:,} FP32 lanes"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def kernels_table(kernels: Sequence[KernelUse]) -> str:
    """One line per kernel: its time, how busy the SMs and the DRAM were, how often an instruction issued, the top stall."""
    rows = []
    for k in kernels:
        top = k.top_stall()
        rows.append([k.kernel, "-" if k.duration_us is None else f"{k.duration_us:.1f} µs", _pct(k.dram_throughput_pct),
                     _pct(k.sm_throughput_pct), _pct(k.issue_active_pct), _pct(k.fma_pipe_pct),
                     "-" if top is None else f"{top[0]} ({top[1]:.0%} of stalls)"])
    columns = ["kernel", "time", "DRAM busy", "SMs busy", "issuing", "FMA pipes", "warps mostly waiting on"]
    return (table(rows, columns, align="lrrrrrl", widths=(16, 0, 0, 0, 0, 0, 0)) +
            "\n(% of each unit's peak; issuing: cycles in which a scheduler issued an instruction; "
            "long_scoreboard: waiting for data from memory)")


def compile_lines(c: CompileFusion) -> str:
    """Kernels launched by eager torch and by torch.compile, and the compiled result against NumPy."""
    return "\n".join([
        f"torch eager launches {c.eager_kernels} GPU kernels for (a + b) * c / s; torch.compile launches "
        f"{c.compiled_kernels}: {', '.join(c.compiled_kernel_names)}",
        f"torch.compile against NumPy: bitwise equal {c.bitwise_equal_to_numpy}, largest difference {c.max_abs_diff_vs_numpy:.3g}; "
        f"torch eager: largest difference {c.max_abs_diff_eager_vs_numpy:.3g}",
        *([] if c.bitwise_equal_to_eager is None else [f"torch.compile against torch eager: bitwise equal {c.bitwise_equal_to_eager}"]),
        f"(torch {c.torch_version}, Triton {c.triton_version}, n = {c.n:,})",
    ])


def summary(claims: SeedClaims) -> str:
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


def sweep_lines(sweep: FmaSweep) -> list[str]:
    """Notebook 02's reading of the FMA sweep: the slowdown from 8 FMAs at 32, at the point nearest the knee and
    over the last doubling; 8 FMAs against the memory floor; the rate at the last point against the model's peak."""
    at = dict(zip(sweep.fmas, sweep.median_ms))
    near = min(sweep.fmas, key=lambda k: abs(k - sweep.knee_fmas))
    last, before = sweep.fmas[-1], sweep.fmas[-2]
    achieved = 2 * last * sweep.n / (at[last] * 1e-3)
    return [f"runtime against 8 FMAs per element: x{at[32] / at[8]:.2f} at 32, x{at[near] / at[8]:.2f} at {near} "
            f"(the measured point nearest the knee); {before} -> {last}: x{at[last] / at[before]:.2f}",
            f"at 8 FMAs per element the kernel takes {at[8] / sweep.memory_floor_ms:.2f}x its memory floor",
            f"at {last} FMAs per element: {achieved / 1e12:.1f} TFLOP/s, {achieved / sweep.peak_flops:.0%} of the model's peak"]


def floor_lines(rows: Sequence[tuple[str, float, float]], bound_gbs: float) -> list[str]:
    """Notebook 02's table: for each ``(kernel, bytes moved, median ms)``, its floor at the bound, the time measured,
    the rate and its share of the bound."""
    cells = []
    for kernel, moved, ms in rows:
        gbs = moved / (ms * 1e-3) / 1e9
        cells.append([kernel, f"{moved / 1e6:.0f} MB", format_ms(moved / (bound_gbs * 1e9) * 1e3), format_ms(ms),
                      f"{gbs:.0f}", f"{gbs / bound_gbs:.0%}"])
    return table(cells, ["kernel", "bytes", "floor", "measured", "GB/s", "% of bound"],
                 widths=(16, 7, 10, 10, 6, 12), gap=1).splitlines()
