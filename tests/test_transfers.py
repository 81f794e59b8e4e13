"""Host <-> device bandwidth: no numbers in the simulator, real ones on a GPU, clear errors always."""

import numpy as np
import pytest
from matplotlib.figure import Figure

import helpers
from helpers.lessons.transfers import measure, report
from helpers.lessons.transfers.record import Transfers

on_gpu = pytest.mark.skipif(helpers.is_simulator(), reason="needs a GPU")
in_simulator = pytest.mark.skipif(not helpers.is_simulator(), reason="simulator behaviour")


@in_simulator
def test_simulator_gives_no_numbers_and_says_why(capsys):
    assert measure.transfer_bandwidth("host->device", "pinned", 4096) is None
    assert measure.measure_transfers() is None
    assert measure.pipeline_timings(1000) is None
    said = capsys.readouterr().out
    assert said.count("timing skipped") == 3 and "simulator" in said


@pytest.mark.parametrize(
    "direction, memory, nbytes, message",
    [
        ("host->gpu", "pinned", 4096, "direction must be one of"),
        ("host->device", "managed", 4096, "memory must be one of"),
        ("device->host", "pageable", 0, "positive multiple of 4"),
        ("device->host", "pageable", 4097, "positive multiple of 4"),
    ],
)
def test_bad_arguments_are_named(direction, memory, nbytes, message):
    with pytest.raises(ValueError, match=message):
        measure.transfer_bandwidth(direction, memory, nbytes)


def test_sweep_sizes_grow_from_kibibytes_to_a_gibibyte():
    sizes = measure.transfer_sizes()
    assert sizes == sorted(sizes) and sizes[0] == 4096 and sizes[-1] == 2**30
    assert all(size % 4 == 0 for size in sizes)


def test_plot_draws_one_line_per_kind_of_copy():
    record = Transfers(
        sizes_bytes=[4096, 2**20], repeats=1,
        gbs={"host->device (pageable)": [1.0, 10.0], "host->device (pinned)": [2.0, 50.0],
             "device->device copy (read + write)": [5.0, 3000.0]},
    )
    figure = report.plot_transfers(record, title="test")
    assert isinstance(figure, Figure)
    axes = figure.axes[0]
    assert [line.get_label() for line in axes.get_lines()] == list(record.gbs)
    assert list(axes.get_lines()[1].get_ydata()) == [2.0, 50.0]


@on_gpu
@pytest.mark.parametrize("direction", measure.DIRECTIONS)
@pytest.mark.parametrize("memory", measure.HOST_MEMORY)
def test_gpu_transfer_bandwidth_is_a_plausible_host_link_figure(direction, memory):
    measured = measure.transfer_bandwidth(direction, memory, 64 * 2**20, repeats=5)
    assert measured is not None
    timing, gbs = measured
    assert len(timing.samples_ms) == 5 and timing.median_ms > 0
    assert 0.1 < gbs < 1000  # a host link, far below device memory


@on_gpu
def test_gpu_sweep_reports_every_kind_of_copy():
    record = measure.measure_transfers(sizes=[2**16, 2**22], repeats=3)
    assert record.sizes_bytes == [2**16, 2**22]
    assert set(record.gbs) == {f"{d} ({m})" for d in measure.DIRECTIONS for m in measure.HOST_MEMORY} | {
        "device->device copy (read + write)"
    }
    assert all(len(v) == 2 and min(v) > 0 for v in record.gbs.values())


@on_gpu
def test_gpu_host_arrays_make_the_pipeline_slower_than_device_arrays():
    timings = measure.pipeline_timings(2**22, repeats=3)
    assert set(timings) == {"three kernels, host arrays", "fused, host arrays",
                            "three kernels, on device", "fused, on device"}
    assert timings["three kernels, host arrays"].median_ms > 2 * timings["three kernels, on device"].median_ms
    assert np.isfinite([t.median_ms for t in timings.values()]).all()


@in_simulator
def test_gpu_code_paths_run_in_the_simulator_with_a_stand_in_timer(monkeypatch):
    """Exercise the plumbing a GPU runs (copies, checks, bookkeeping) without timing anything."""
    from helpers.timing import Timing

    calls = []

    def stand_in_timer(run, *, label="", repeats=1, warmup=0):
        run()
        calls.append(label)
        return Timing(label, [1.0])

    monkeypatch.setattr(measure, "is_simulator", lambda: False)
    monkeypatch.setattr(measure, "time_gpu", stand_in_timer)
    monkeypatch.setattr(measure, "copy_bandwidth", lambda n, repeats: (Timing("copy", [1.0]), 8.0 * n / 1e6))

    timing, gbs = measure.transfer_bandwidth("device->host", "pinned", 4096)
    assert calls == ["device->host (pinned)"] and gbs == pytest.approx(4096 / 1e-3 / 1e9)

    record = measure.measure_transfers(sizes=[4096, 8192], repeats=1)
    assert list(record.gbs) == [
        "host->device (pageable)", "host->device (pinned)", "device->host (pageable)", "device->host (pinned)",
        "device->device copy (read + write)",
    ]
    assert record.gbs["device->device copy (read + write)"] == [8.0 * 1024 / 1e6, 8.0 * 2048 / 1e6]

    timings = measure.pipeline_timings(300)  # each workload is checked against NumPy before "timing"
    assert list(timings) == ["three kernels, host arrays", "fused, host arrays",
                             "three kernels, on device", "fused, on device"]


def test_host_copy_warnings_prints_numbas_copy_warning_once_with_its_count_and_without_colour_codes(capsys):
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    from helpers.lessons.transfers.report import HOST_COPY, host_copy_warnings, quiet_host_copies

    with host_copy_warnings():
        for _ in range(3):
            warnings.warn(f"\x1b[1m{HOST_COPY} will incur copy overhead to/from device.\x1b[0m", NumbaPerformanceWarning)
    printed = capsys.readouterr().out
    assert printed == f"NumbaPerformanceWarning (3x): {HOST_COPY} will incur copy overhead to/from device.\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_host_copies():
            warnings.warn(f"{HOST_COPY} will incur copy overhead", NumbaPerformanceWarning)
            warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in caught] == ["something else"]
