import pytest
from matplotlib.figure import Figure
from numba import cuda

import helpers
from helpers import checks, pipeline
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
def test_simulator_timing_says_why_and_returns_no_number(capsys):
    calls = []
    assert time_gpu(lambda: calls.append(1)) is None
    assert copy_bandwidth(100) is None
    assert SIMULATOR_MESSAGE in capsys.readouterr().out
    assert calls == []  # nothing was run to produce a number


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
