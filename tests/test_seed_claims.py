"""The seed-claims measurement: ncu CSV parsing, stall ranking, Triton excerpt, JSON round trip."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers import checks, results
from helpers.device import compute_capability, sm_count
from helpers.harness.cli import parse
from helpers.lessons.arithmetic import measure as sc
from helpers.lessons.arithmetic import record, report
from ncu_support import ncu_csv

CSV = "==PROF== Connected to process\n" + ncu_csv(("1", "python", "h"), "(4, 1, 1)", {
    "add_kernel": {
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "12.5"),
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "88.0"),
        "gpu__time_duration.sum": ("ns", "2,000"),
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": ("", "30"),
        "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": ("", "10"),
    },
    "fused_kernel": {"sm__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "n/a")},
})


def test_parse_and_use():
    rows = sc.parse_metrics_csv(CSV)
    assert [r["kernel"] for r in rows] == ["add_kernel", "fused_kernel"]
    use = sc.kernel_use(rows[0]["kernel"], 1024, rows[0]["metrics"])
    assert use.sm_throughput_pct == 12.5 and use.dram_throughput_pct == 88.0 and use.duration_us == 2.0
    assert use.top_stall() == ("long_scoreboard", pytest.approx(0.75))
    fused = sc.kernel_use("fused_kernel", 1024, rows[1]["metrics"])
    assert fused.sm_throughput_pct is None and fused.top_stall() is None


def test_parse_rejects_output_without_csv():
    with pytest.raises(RuntimeError, match="CSV header"):
        sc.parse_metrics_csv("==PROF== nothing profiled")


def test_triton_excerpt_keeps_only_the_kernel():
    module = "import triton\n\n@triton.jit\ndef triton_poi_0(in_ptr0, xnumel):\n    x = 1\n\ndef call(args):\n    pass\n"
    assert sc.triton_kernel_excerpt(module) == "@triton.jit\ndef triton_poi_0(in_ptr0, xnumel):\n    x = 1"


def test_lanes_are_counted_on_a_gpu_and_refused_in_the_simulator():
    if helpers.is_simulator():
        with pytest.raises(RuntimeError, match="simulator"):
            sc.count_lanes()
        return
    lanes = sc.count_lanes()
    assert lanes.lanes == lanes.sm_count * lanes.fp32_lanes_per_sm == sm_count() * sc.FP32_LANES_PER_SM[compute_capability()]


def test_round_trip_and_table(tmp_path):
    claims = record.SeedClaims(
        lanes=record.LaneCount(132, [9, 0], 128, 16896),
        kernels=[sc.kernel_use("add_kernel", 1024, sc.parse_metrics_csv(CSV)[0]["metrics"])],
        ncu_metrics=list(sc.THROUGHPUT_METRICS),
        compile=record.CompileFusion(1024, 3, 1, ["triton_poi_fused_0"], "@triton.jit", 4.8e-7, False, 0.0, "2.9", "3.4"),
        errors={"x": "why"},
    )
    results.save(claims, tmp_path)
    back = results.load(record.SeedClaims, tmp_path)
    assert back.provenance is not None and back.provenance.backend == ("simulator" if helpers.is_simulator() else "gpu")
    back.provenance = claims.provenance
    assert back == claims
    text = report.summary(back)
    assert "132 SMs x 128 FP32 lanes per SM = 16,896" in text and "torch.compile launches 1" in text
    assert "x not measured" in text and "long_scoreboard (75% of stalls)" in text


def _fake_sweep(monkeypatch, kernel=None, n=1003):
    """sweep_fmas with the GPU-only parts stood in for: each median grows with the FMAs, as a stand-in clock."""
    class Timed:
        def __init__(self, ms):
            self.median_ms, self.spread_ms = ms, ms / 100

    calls = []

    def fake_time(run, repeats):
        run()  # the kernel still runs (in the simulator, on the learner's arrays)
        calls.append(repeats)
        return Timed(0.1 + 0.001 * len(calls))

    monkeypatch.setattr(sc, "require_gpu", lambda what: None)
    monkeypatch.setattr(sc.timing, "time_gpu", fake_time)
    monkeypatch.setattr(sc, "datasheet_bandwidth_gbs", lambda: 4800.0)
    monkeypatch.setattr(sc, "peak_fp32_flops", lambda: 66.9e12)
    return sc.sweep_fmas(n, repeats=3, **({"kernel": kernel} if kernel else {})), calls


def test_fma_sweep_checks_its_kernel_times_every_count_and_reads_back(monkeypatch, tmp_path):
    if not helpers.is_simulator():
        pytest.skip("stands in for the GPU's clock: a simulator test")
    sweep, calls = _fake_sweep(monkeypatch)
    assert sweep.fmas == [8 * 2**k for k in range(9)] and calls == [3] * 9
    assert sweep.median_ms == pytest.approx([0.1 + 0.001 * k for k in range(1, 10)])
    assert sweep.iqr_ms == pytest.approx([m / 100 for m in sweep.median_ms])  # each median keeps its spread
    assert sweep.memory_floor_ms == pytest.approx(8 * 1003 / 4.8e12 * 1e3)
    assert sweep.knee_fmas == pytest.approx(66.9e12 * 8 / (2 * 4.8e12))
    lines = report.sweep_lines(sweep)  # 8, 32, 64 (nearest the knee of ~56), 1024 and 2048 FMAs: the 1st, 3rd, 4th, 8th, 9th
    assert lines[0] == (f"runtime against 8 FMAs per element: x{0.103 / 0.101:.2f} at 32, x{0.104 / 0.101:.2f} at 64 "
                        f"(the measured point nearest the knee); 1024 -> 2048: x{0.109 / 0.108:.2f}")
    assert lines[1] == f"at 8 FMAs per element the kernel takes {0.101 / sweep.memory_floor_ms:.2f}x its memory floor"
    path = results.save(sweep, tmp_path)
    assert results.load(record.FmaSweep, tmp_path) == sweep and path.name == "fma_sweep.json"


def test_fma_sweep_refuses_a_kernel_that_gets_the_arithmetic_wrong(monkeypatch):
    if not helpers.is_simulator():
        pytest.skip("stands in for the GPU's clock: a simulator test")
    @cuda.jit
    def one_fma_short(x, out, rounds):
        i = cuda.grid(1)
        if i < out.size:
            y = x[i]
            for _ in range(rounds):
                for _ in range(7):
                    y = y * np.float32(0.999) + np.float32(0.001)
            out[i] = y

    with pytest.raises(checks.CheckFailed):
        _fake_sweep(monkeypatch, one_fma_short)


def test_fma_sweep_is_refused_in_the_simulator_by_name():
    if not helpers.is_simulator():
        pytest.skip("the refusal is the simulator's")
    with pytest.raises(SystemExit):
        parse("helpers.lessons.arithmetic", sc.COMMANDS, ["sweep"])
