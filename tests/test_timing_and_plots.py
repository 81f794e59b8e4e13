import numpy as np
import pytest
from matplotlib.figure import Figure
from numba import cuda

import helpers
from helpers import checks, pipeline, timing
from helpers.ledger import Ledger
from helpers.plots import plot_trips_vs_runtime
from helpers.timing import SIMULATOR_MESSAGE, Timing, copy_bandwidth, format_ms, time_gpu


def test_timing_statistics():
    t = Timing("x", [1.0, 2.0, 3.0, 4.0, 100.0])
    assert t.median_ms == 3.0
    assert t.spread_ms == pytest.approx(2.0)
    assert t.bandwidth_gbs(3_000_000) == pytest.approx(1.0)
    assert "median 3.000 ms" in str(t)
    assert format_ms(0.0123) == "12.3 µs"


@pytest.mark.skipif(not helpers.is_simulator(), reason="simulator behaviour")
def test_simulator_timing_runs_the_work_once_says_why_and_returns_no_number(capsys):
    calls = []
    assert time_gpu(lambda: calls.append(1), repeats=20, warmup=5) is None
    assert calls == [1]  # run once, for correctness; never repeated to make a number
    assert copy_bandwidth(100) is None
    assert capsys.readouterr().out.count(SIMULATOR_MESSAGE) == 2


@pytest.mark.skipif(not helpers.is_simulator(), reason="simulator behaviour")
def test_simulator_timing_runs_real_kernels_and_their_errors_show():
    n = 300
    host = checks.random_inputs(n)
    a, b, c = (cuda.to_device(x) for x in host)
    out = checks.poisoned(n)
    assert time_gpu(lambda: pipeline.run_fused(a, b, c, 2.0, out)) is None
    checks.check_close(out, pipeline.reference(*host, 2.0))  # the timed lambda really ran
    with pytest.raises(ValueError, match="same array"):
        time_gpu(lambda: pipeline.run_fused(a, b, c, 2.0, a))  # a broken lambda fails in CI too


@pytest.mark.parametrize("run", [None, 3.5, "run_fused"])
def test_time_gpu_needs_something_to_call(run):
    with pytest.raises(TypeError, match=f"time_gpu needs a function to call, got {type(run).__name__}.*lambda"):
        time_gpu(run)


@pytest.mark.parametrize("kwargs, message", [
    ({"repeats": 0}, "repeats must be a whole number >= 1, got 0"),
    ({"repeats": 2.5}, "repeats must be a whole number"),
    ({"warmup": -1}, "warmup must be a whole number >= 0"),
])
def test_time_gpu_checks_its_counts(kwargs, message):
    calls = []
    with pytest.raises(ValueError, match=message):
        time_gpu(lambda: calls.append(1), **kwargs)
    assert calls == []


class FakeEvent:
    """Stands in for a CUDA event: records when it is recorded, in one shared log."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def record(self):
        self.log.append(self.name)

    def synchronize(self):
        self.log.append("sync")


def test_the_hold_kernel_is_queued_before_the_start_event(monkeypatch):
    """The events must bracket the work alone: a hold inside them would add ~200 µs to every sample."""
    log = []
    names = iter(["start", "end"])
    monkeypatch.setattr(timing, "is_simulator", lambda: False)  # the fakes stand in for a GPU's events
    monkeypatch.setattr(cuda, "event", lambda *a, **k: FakeEvent(log, next(names)), raising=False)
    monkeypatch.setattr(cuda, "event_elapsed_time", lambda start, end: 0.01, raising=False)
    monkeypatch.setattr(timing, "hold_gpu", lambda us: log.append(f"hold {us:g}"))
    samples = timing.event_samples(lambda: log.append("run"), 2, hold_us=250.0, before=lambda: log.append("flush"))
    assert samples == [0.01, 0.01]
    assert log == ["flush", "hold 250", "start", "run", "end", "sync"] * 2
    log.clear()
    names = iter(["start", "end"])
    timing.event_samples(lambda: log.append("run"), 1)  # no hold asked: none queued
    assert log == ["start", "run", "end", "sync"]


@pytest.mark.skipif(helpers.is_simulator(), reason="needs a GPU")
def test_gpu_timing_leaves_the_hold_out_of_the_samples(monkeypatch):
    n = 1 << 10  # a few microseconds of GPU work, far shorter than any hold
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(n))
    out = checks.poisoned(n)
    holds = []
    original = timing.hold_gpu
    monkeypatch.setattr(timing, "hold_gpu", lambda us: (holds.append(us), original(us)))
    measured = time_gpu(lambda: pipeline.run_fused(a, b, c, 2.0, out), repeats=20)
    assert len(holds) == 20 and min(holds) >= timing.MIN_HOLD_US  # every repeat was queued behind a hold
    assert measured.median_ms * 1e3 < timing.MIN_HOLD_US / 2, f"{measured}: the hold was timed too"
    assert measured.launch_hidden is True
    idle = time_gpu(lambda: pipeline.run_fused(a, b, c, 2.0, out), repeats=3, hide_launch=False)
    assert idle.launch_hidden is False and len(holds) == 20  # no hold: the host's cost is in the time, and said to be


@pytest.mark.skipif(helpers.is_simulator(), reason="needs a GPU")
def test_gpu_timing_measures_real_work():
    n = 1 << 22
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(n))
    out = checks.poisoned(n)
    timing = time_gpu(lambda: pipeline.run_fused(a, b, c, 2.0, out), repeats=10)
    assert timing is not None and len(timing.samples_ms) == 10
    assert 0 < timing.median_ms < 100
    ceiling = copy_bandwidth(n)
    assert ceiling is not None and ceiling[1] > 100  # GB/s: any GPU copies faster than this


def test_plot_returns_a_figure_with_and_without_timings():
    n = 100
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(n))
    out = checks.poisoned(n)
    with Ledger("fused") as fused:
        pipeline.run_fused(a, b, c, 2.0, out)
    figure = plot_trips_vs_runtime([(fused, None)])
    assert isinstance(figure, Figure)
    assert "no runtime in the simulator" in " ".join(t.get_text() for t in figure.axes[1].texts)
    timed = plot_trips_vs_runtime([(fused, Timing("fused", [1.0, 1.2]))])
    assert timed.axes[1].get_ylabel() == "median runtime (ms)"
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_trips_vs_runtime([])


@pytest.mark.parametrize("n", [0, -4, 2.5])
def test_copy_bandwidth_needs_elements(n):
    with pytest.raises(ValueError, match="n must be a positive whole number"):
        copy_bandwidth(n)


# --- bad input: named, never a crash deep inside or a made-up number -----------------------------


@pytest.mark.parametrize("samples, message", [
    ([], "Timing 'x' needs samples_ms, a non-empty list"),
    (None, "needs samples_ms"),
    ("1.0", "needs samples_ms"),
    ([1.0, -2.0], "sample 1 of Timing 'x' is -2.0: a time is a finite number of milliseconds >= 0"),
    ([-1.0], "sample 0 .*simulator give -1"),
    ([1.0, float("nan")], "sample 1 of Timing 'x' is nan"),
    ([float("inf")], "sample 0 of Timing 'x' is inf"),
    ([1.0, "2"], "sample 1 of Timing 'x' is '2'"),
    ([True], "sample 0 of Timing 'x' is True"),
])
def test_a_timing_needs_real_samples(samples, message):
    with pytest.raises(ValueError, match=message):
        Timing("x", samples)


def test_a_zero_time_gives_no_bandwidth_but_a_reason():
    t = Timing("x", [0.0, 0.0, 1.0])
    assert t.median_ms == 0.0  # a time of 0 can be read (the clock's resolution), but not divided by
    with pytest.raises(ValueError, match="x: the median time is 0 ms.*time more work"):
        t.bandwidth_gbs(100)
    assert Timing("y", (np.float32(2.0),)).bandwidth_gbs(2_000_000) == pytest.approx(1.0)


@pytest.mark.parametrize("call, message", [
    (lambda: timing.event_samples(lambda: None, -1), "repeats must be a whole number >= 1, got -1"),
    (lambda: timing.event_samples(lambda: None, 0), "repeats must be a whole number >= 1, got 0"),
    (lambda: timing.event_samples(lambda: None, 2.0), "repeats must be a whole number >= 1, got 2.0"),
    (lambda: timing.host_enqueue_us(lambda: None, samples=0), "samples must be a whole number >= 1, got 0"),
    (lambda: timing.hold_gpu(-5), "microseconds must be a finite number >= 0, got -5"),
    (lambda: timing.hold_gpu(float("nan")), "microseconds must be a finite number >= 0, got nan"),
])
def test_counts_and_durations_are_checked_on_every_backend(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("call", [timing.event_samples, timing.host_enqueue_us])
def test_the_timers_need_something_to_call(call):
    with pytest.raises(TypeError, match=f"{call.__name__} needs a function to call, got NoneType"):
        call(None, 3) if call is timing.event_samples else call(None)


@pytest.mark.skipif(not helpers.is_simulator(), reason="simulator behaviour")
@pytest.mark.parametrize("name, call", [
    ("event_samples", lambda: timing.event_samples(lambda: None, 3)),
    ("hold_gpu", lambda: timing.hold_gpu(100)),
    ("us_per_hold_iteration", lambda: timing.us_per_hold_iteration()),
])
def test_gpu_only_timers_say_they_need_a_gpu_in_the_simulator(name, call):
    with pytest.raises(timing.TimingNeedsGPU, match=f"{name} needs a GPU.*time_gpu works on either backend"):
        call()


def test_an_l2_flush_runs_before_every_repeat_and_outside_the_timed_span():
    """On a GPU: the flush kernel reads FLUSH_FACTOR L2 sizes each repeat, and the samples are still one per repeat;
    in the simulator there is no L2 to flush, and asking says so."""
    if helpers.is_simulator():
        with pytest.raises(timing.TimingNeedsGPU, match="l2_flush needs a GPU"):
            timing.l2_flush()
        return
    calls = []
    flush = timing.l2_flush()
    result = timing.event_samples(lambda: calls.append(1), 7, before=lambda: (calls.append(0), flush()))
    assert len(result) == 7 and calls == [0, 1] * 7
    assert timing.time_gpu(lambda: None, repeats=3, warmup=0, flush_l2=True).samples_ms


def test_a_committed_median_is_drawn_and_its_source_named():
    """Where there is no GPU a lesson passes the committed run's medians (milliseconds): they are drawn, and the
    runtime panel names where they come from."""
    n = 100
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(n))
    with Ledger("three kernels") as three:
        pipeline.run_three_kernels(a, b, c, 2.0, checks.poisoned(n), checks.poisoned(n), checks.poisoned(n))
    with Ledger("fused") as fused:
        pipeline.run_fused(a, b, c, 2.0, checks.poisoned(n))
    fig = plot_trips_vs_runtime([(three, 0.68), (fused, 0.28)], runtime_source="committed H200 run")
    runtime = fig.axes[1]
    assert runtime.get_title() == "committed H200 run"
    assert sorted(round(float(p.get_offsets()[0][1]), 2) for p in runtime.collections) == [0.28, 0.68]
