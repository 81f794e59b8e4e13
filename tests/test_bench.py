"""The size sweep (helpers.lessons.sweep.measure), its analysis (helpers.lessons.sweep.analysis), tables and plots
(helpers.lessons.sweep.report).

Analysis and plots are tested on *synthetic* curves built from a simple model
(launch cost + bytes / bandwidth), so that the expected regimes are known.
"""


import re

import numpy as np
import pytest
from matplotlib.figure import Figure

import helpers
from helpers.harness import campaign, cli
from helpers.harness.device_checks import poison_on_device
from helpers.harness.tables import power_label
from helpers.lessons.sweep import analysis as sa
from helpers.lessons.sweep import measure
from helpers.lessons.sweep import report as sp
from helpers.lessons.sweep.record import (
    ImplementationInfo,
    LauncherCost,
    LaunchOverhead,
    Measurement,
    PipelineTraffic,
    Sweep,
    SweepSettings,
    Verification,
)
from helpers.results import Provenance, load

L2 = 60 * 2**20
SIZES = [2**k for k in range(10, 29)]


def model_ms(n, launches, bytes_per_element, working_set_per_element, *, launch_us=2.0, cold=False):
    """Launch cost plus bytes over bandwidth: L2 speed while the working set fits (and the cache is warm)."""
    n = np.asarray(n, dtype=float)
    fits = n * working_set_per_element <= L2
    bandwidth = np.where(fits & (not cold), 10e12, 3.5e12)
    return (launches * launch_us * 1e-6 + n * bytes_per_element / bandwidth) * 1e3


def synthetic_result(device="NVIDIA H200", launch_us=2.0, with_copy=True):
    """A Sweep record from the model (not a measurement)."""
    pipelines = {
        "three kernels": PipelineTraffic(3, 6, 32.0, 24.0, ["t1", "t2"], "model"),
        "fused": PipelineTraffic(1, 2, 16.0, 16.0, [], "model"),
        "copy": PipelineTraffic(1, 2, 8, 8, [], "model"),
    }
    impls = {"numba three kernels": "three kernels", "numba fused": "fused"}
    if with_copy:
        impls["device copy"] = "copy"
    provenance = Provenance(backend="gpu", device=device, sm_count=132, compute_capability=[9, 0], cuda_driver="13.0",
                            python="3.12", versions={"numba": "0.68.0", "numba-cuda": "0.30.4"}, date="2025-01-01")
    settings = SweepSettings(sizes=SIZES, repeats=1, warmup=0, dtype="float32", block_size=256, l2_bytes=L2,
                             modes={}, cache_policy="", verification="")
    sweep = Sweep(provenance=provenance, benchmark="synthetic", simulated=False, note="a model", complete=True,
                  settings=settings, pipelines=pipelines)
    for label, traffic in impls.items():
        p = pipelines[traffic]
        sweep.implementations[label] = ImplementationInfo(key=label, device="gpu", traffic=traffic, note="",
                                                          bytes_per_element=p.bytes_per_element,
                                                          working_set_per_element=p.working_set_per_element)
        for mode, cold, extra_us in (("loop", False, 20.0), ("gpu", False, 0.0), ("gpu_cold", True, 0.0)):
            times = model_ms(SIZES, p.launches, p.bytes_per_element, p.working_set_per_element,
                             launch_us=launch_us + extra_us, cold=cold)
            for n, t in zip(SIZES, times):
                sweep.measurements.append(Measurement(label, n, mode, float(t), 0.0, [float(t)]))
    return sweep


# --- options -----------------------------------------------------------------------------------


PACKAGE = "helpers.lessons.sweep"


def parse(argv):
    return cli.parse(PACKAGE, measure.COMMANDS, argv)


def test_implementations_are_checked_by_name(capsys):
    assert parse(["--impl", "all"]).impl == list(measure.IMPLEMENTATIONS)
    assert parse(["--impl", "fused,three,fused"]).impl == ["fused", "three"]
    with pytest.raises(SystemExit):
        parse(["--impl", "fused,bogus"])
    assert re.search("unknown implementation.*bogus.*choose from", capsys.readouterr().err)


def test_command_line_defaults_and_errors(capsys):
    options = parse(["--impl", "three,fused", "--repeats", "30"])
    assert options.impl == ["three", "fused"] and options.repeats == 30
    assert options.sizes == (campaign.SIMULATOR_SIZES if helpers.is_simulator() else campaign.GPU_SIZES)
    for argv, message in ((["--impl", "nope"], "unknown implementation"), (["--repeats", "0"], "repeats must be >= 1"),
                          (["--sizes", "2^x"], "cannot read size")):
        with pytest.raises(SystemExit) as exit_info:
            parse(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.skipif(not helpers.is_simulator(), reason="simulator limit")
def test_simulator_refuses_gpu_sizes(capsys):
    with pytest.raises(SystemExit):
        parse(["--sizes", "2^20"])
    assert "too large for the CUDA simulator" in capsys.readouterr().err


# --- the sweep ------------------------------------------------------------------------------


@pytest.mark.skipif(not helpers.is_simulator(), reason="the simulated sweep")
def test_simulator_sweep_checks_everything_and_times_nothing(tmp_path):
    assert cli.main_of(PACKAGE, measure.COMMANDS, ["--sizes", "100,300", "--impl", "three,fused,numpy,copy,torch",
                                                   "--out", str(tmp_path), "--quiet", "--no-plots"]) == 0
    assert "median_ms" not in (tmp_path / "bench_sweep.json").read_text()  # no number that could pass for a time
    result = load(Sweep, tmp_path)
    assert result.simulated is True and "SIMULATED" in result.note and result.complete
    assert result.provenance.backend == "simulator"
    assert result.measurements == []
    checked = {(v.implementation, v.n) for v in result.verification if v.passed}
    for label in ("numba three kernels", "numba fused", "numpy (CPU)", "device copy"):
        assert {(label, 100), (label, 297), (label, 300)} <= checked  # 297: not a multiple of 256
    assert result.implementations["torch eager"].status == "skipped"
    assert result.pipelines["three kernels"].trips == 6 and result.pipelines["fused"].trips == 2
    assert {claim.holds for claim in result.claims} == {None}
    overhead = load(LaunchOverhead, tmp_path)
    assert overhead.simulated is True and overhead.launchers == {}


def _half_written(pool):
    """A deliberately wrong implementation: the fused kernel on the first half only."""
    from helpers.pipeline import fused_kernel
    from helpers.sizes import blocks_for

    def case(n):
        a, b, c, _, _, out = pool.views(n)
        half = n // 2
        return campaign.Case(lambda: fused_kernel[blocks_for(half), 256](a[:half], b[:half], c[:half], pool.s, out[:half]),
                             lambda: out, lambda: poison_on_device(out), pool.expected[:n])

    return case


def test_a_wrong_implementation_is_caught_and_never_timed(monkeypatch):
    wrong = measure.Implementation("wrong", "half written", "gpu", "fused", "writes half of out", _half_written)
    monkeypatch.setitem(measure.IMPLEMENTATIONS, "wrong", wrong)
    result = measure.run_sweep([256, 512], ["wrong", "fused"], repeats=2, warmup=1, progress=False)
    failures = [v for v in result.verification if not v.passed]
    assert len(failures) == 1 and "never written" in failures[0].error
    assert result.implementations["half written"].status == "failed"
    assert all(m.implementation != "half written" for m in result.measurements)
    assert any(v.implementation == "numba fused" and v.n == 512 and v.passed for v in result.verification)


@pytest.mark.skipif(helpers.is_simulator(), reason="needs a GPU")
def test_gpu_sweep_times_every_mode():
    result = measure.run_sweep([2**12, 2**20], ["three", "fused", "copy"], repeats=5, warmup=2, progress=False)
    modes = {(m.implementation, m.n, m.mode) for m in result.measurements}
    assert len(modes) == 3 * 2 * 3
    assert all(m.median_ms > 0 and len(m.samples_ms) == 5 for m in result.measurements)
    three = sa.median_at(result, "numba three kernels", 2**20, "gpu")
    fused = sa.median_at(result, "numba fused", 2**20, "gpu")
    assert three > fused  # twice the bytes and three launches
    assert result.settings.l2_bytes > 2**20


@pytest.mark.skipif(helpers.is_simulator(), reason="needs a GPU")
def test_gpu_launch_overhead_is_measured_for_both_numba_styles():
    overhead = measure.measure_launch_overhead(launches=20, repeats=2)
    rows = overhead.launchers
    for label in ("numba fused, lazy @cuda.jit", "numba fused, explicit signature", "numba add, explicit signature"):
        assert 0 < rows[label].issue_us < 10_000
        assert rows[label].launch_and_wait_us > 0


# --- reading the regimes off the data ------------------------------------------------------


def test_growth_per_doubling():
    n = np.array(SIZES[:6], dtype=float)
    assert np.allclose(sa.growth_per_doubling(n, 3e-6 * n), 2.0)
    assert np.allclose(sa.growth_per_doubling(n, np.full(n.size, 0.02)), 1.0)


def describe_spans(spans):
    """``launch-bound 2^10..2^18, DRAM-bound 2^22..2^28`` (transitions left out)."""
    parts = []
    for label, first, last in spans:
        if label == sa.TRANSITION:
            continue
        where = power_label(first) if first == last else f"{power_label(first)}..{power_label(last)}"
        parts.append(f"{label} {where}")
    return ", ".join(parts) or "no clear regime"


def test_three_regimes_are_read_off_a_synthetic_curve():
    ws = np.array(SIZES, float) * 16
    warm = model_ms(SIZES, 1, 16, 16)
    cold = model_ms(SIZES, 1, 16, 16, cold=True)
    labels = sa.classify_regimes(SIZES, warm, ws, L2, cold_times_ms=cold)
    by_n = dict(zip(SIZES, labels))
    assert by_n[2**10] == by_n[2**14] == sa.LAUNCH_BOUND  # 2 µs launch, a few ns of traffic
    assert by_n[2**21] == sa.L2_RESIDENT  # 32 MiB fits in 60 MiB, and warm beats cold
    assert by_n[2**24] == by_n[2**28] == sa.DRAM_BOUND
    spans = sa.regime_spans(SIZES, labels)
    assert [s[0] for s in spans if s[0] != sa.TRANSITION] == [sa.LAUNCH_BOUND, sa.L2_RESIDENT, sa.DRAM_BOUND]
    assert spans[0][1] == 2**10 and spans[-1][2] == 2**28
    assert describe_spans(spans).startswith("launch-bound 2^10..")


def test_no_l2_regime_when_the_cache_does_not_help():
    ws = np.array(SIZES, float) * 16
    cold = model_ms(SIZES, 1, 16, 16, cold=True)
    labels = sa.classify_regimes(SIZES, cold, ws, L2, cold_times_ms=cold)  # warm == cold: no cache benefit
    assert sa.L2_RESIDENT not in labels
    assert labels[-1] == sa.DRAM_BOUND


def test_a_flat_curve_is_launch_bound_everywhere():
    labels = sa.classify_regimes(SIZES, np.full(len(SIZES), 0.07), np.array(SIZES) * 16.0, L2)
    assert set(labels) == {sa.LAUNCH_BOUND}


@pytest.mark.parametrize("kwargs, message", [
    (dict(sizes=[1, 2], times_ms=[1.0], working_set_bytes=[1, 2], l2_bytes=L2), "equal length"),
    (dict(sizes=[2, 1], times_ms=[1.0, 2.0], working_set_bytes=[1, 2], l2_bytes=L2), "strictly increasing"),
    (dict(sizes=[1, 2], times_ms=[1.0, -1.0], working_set_bytes=[1, 2], l2_bytes=L2), "positive"),
    (dict(sizes=[1, 2], times_ms=[1.0, 2.0], working_set_bytes=[1, 2], l2_bytes=0), "l2_bytes"),
    (dict(sizes=[1], times_ms=[1.0], working_set_bytes=[1], l2_bytes=L2), "at least two"),
])
def test_bad_curves_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sa.classify_regimes(**kwargs)


def test_reading_a_result():
    result = synthetic_result()
    sizes, times = sa.series(result, "numba fused", "gpu")
    assert list(sizes) == SIZES and np.all(np.diff(times) >= 0)
    n, ratio = sa.speedup(result, "numba three kernels", "numba fused", "gpu_cold")
    assert ratio[-1] == pytest.approx(2.0, rel=0.01)  # DRAM-bound: the bytes ratio
    assert sa.copy_gbs(result) == pytest.approx(3500, rel=0.01)
    labels = sa.regimes_of(result, "numba fused", "gpu")
    assert labels[0] == sa.LAUNCH_BOUND and labels[-1] == sa.DRAM_BOUND and sa.L2_RESIDENT in labels
    with pytest.raises(KeyError, match="no implementation 'cupy'"):
        sa.series(result, "cupy", "gpu")


def test_claims_hold_fail_and_are_not_compared_across_gpus():
    result = synthetic_result()
    claims = {c.claim.split(" at 2^28")[0]: c for c in measure.check_claims(result)}
    speedup = claims["fused is >= 2x faster than three kernels"]
    assert speedup.holds is True and speedup.measured == pytest.approx(2.0, rel=0.02)
    assert speedup.line().startswith("fused is >= 2x faster than three kernels at 2^28 (the bytes ratio is 2): yes, 2.0")
    assert claims["torch.compile"].holds is None  # not measured
    # the model's 3 µs-per-launch fused time at 2^28 is ~1.2 ms: within 10 % of the earlier probe's 1.165 ms
    assert claims["numba fused"].holds is True
    other = {c.claim.split(" at 2^28")[0]: c for c in measure.check_claims(synthetic_result(device="Some GPU"))}
    assert other["numba fused"].holds is None and "not an H200" in other["numba fused"].note
    slow = synthetic_result()
    fused_ms = sa.median_at(slow, "numba fused", 2**28)
    for m in slow.measurements:
        if m.implementation == "numba three kernels" and m.n == 2**28 and m.mode == "loop":
            m.median_ms = 1.5 * fused_ms  # a fusion that bought only 1.5x
    slow_claim = measure.check_claims(slow)[0]
    assert slow_claim.holds is False and slow_claim.line().endswith("no, 1.50x")


# --- plots ---------------------------------------------------------------------------------------


def model_speedup_at(n):
    """time(three kernels) / time(fused) in loop mode, straight from the model synthetic_result is built from."""
    launch_us = 2.0 + 20.0  # synthetic_result's launch cost plus its loop-mode extra
    three = model_ms([n], 3, 32.0, 24.0, launch_us=launch_us)[0]
    fused = model_ms([n], 1, 16.0, 16.0, launch_us=launch_us)[0]
    return three / fused


def headline_text(result):
    """The headline plot's annotation (the one text that starts with "fused is")."""
    texts = [t.get_text() for t in sp.plot_headline(result).axes[0].texts if t.get_text().startswith("fused is")]
    assert len(texts) == 1, texts
    return texts[0]


def test_plots_return_figures_with_curves_and_regimes(tmp_path):
    result = synthetic_result()
    runtime = sp.plot_sweep_runtime(result)
    assert isinstance(runtime, Figure) and len(runtime.axes) == 2
    assert {"numba three kernels", "numba fused"} <= {line.get_label() for line in runtime.axes[0].lines}
    assert any("launch-bound" in str(p.get_label()) for p in runtime.axes[0].patches)
    assert any("6 trips" in t.get_text() for t in runtime.axes[0].texts)
    bandwidth = sp.plot_bandwidth(result)
    assert any("datasheet bound 4,800 GB/s" in t.get_text() for t in bandwidth.axes[0].texts)
    assert isinstance(sp.plot_speedup(result), Figure)
    assert headline_text(result) == f"fused is {model_speedup_at(2**28):.2f}x faster at n = 2^28"
    faster = synthetic_result()
    for m in faster.measurements:  # halve the fused loop time at the largest size: the headline must follow
        if m.implementation == "numba fused" and m.n == 2**28 and m.mode == "loop":
            m.median_ms /= 2
    assert headline_text(faster) == f"fused is {2 * model_speedup_at(2**28):.2f}x faster at n = 2^28"
    overhead = LaunchOverhead(simulated=False, note="", n=1024,
                              launchers={"numba fused, lazy @cuda.jit": LauncherCost(20.0, 20.0, 30.0, [20.0], [30.0])})
    assert isinstance(sp.plot_launch_overhead(overhead), Figure)
    paths = sp.save_all(result, tmp_path, overhead=overhead)
    assert sorted(p.name for p in paths) == sorted(sp.PNG_NAMES.values())
    assert all(p.stat().st_size > 1000 for p in paths)


def test_plots_of_a_simulated_sweep_say_there_are_no_timings():
    result = synthetic_result()
    result.simulated, result.measurements = True, []
    result.verification = [Verification(implementation="numba fused", n=300, passed=True)]
    for plot in (sp.plot_sweep_runtime, sp.plot_bandwidth, sp.plot_speedup, sp.plot_headline):
        figure = plot(result)
        assert "no timings" in " ".join(t.get_text() for t in figure.axes[0].texts)
        assert not figure.axes[0].lines
    assert sp.summary_table(result).startswith("no timings")
