"""The seed-claims measurement: ncu CSV parsing, stall ranking, Triton excerpt, JSON round trip."""

from __future__ import annotations

import pytest

import helpers
from helpers import results
from helpers.device import compute_capability, sm_count
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
