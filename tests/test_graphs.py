"""CUDA graphs (helpers.lessons.launches.graphs) and the launches measurement (helpers.lessons.launches.measure).

In the simulator: launches are checked before capture (host arrays refused), capture
says graphs need a GPU, nothing is timed, the ledger counts the launches a graph
would record, and the measurement's record and claims behave.  On a GPU: capture,
replay, bitwise equality with direct launches, feeding new inputs, refusals.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers import results
from helpers.checks import check_close, random_inputs
from helpers.launch_hook import host_copy
from helpers.ledger import Ledger
from helpers.harness import cli
from helpers.lessons.launches import graphs, kernels, measure, report
from helpers.lessons.launches import record as lr
from helpers.pipeline import (
    add_kernel,
    fused_kernel,
    launch_fused,
    launch_three,
    reference,
    run_fused,
    run_three_kernels,
)
from helpers.sizes import BLOCK_SIZE, blocks_for

on_gpu = pytest.mark.skipif(helpers.is_simulator(), reason="needs a GPU")
in_simulator = pytest.mark.skipif(not helpers.is_simulator(), reason="simulator behaviour")

N = 300  # small: the simulator runs a few thousand threads per second; not a multiple of the block


def three_pipeline(a, b, c, s, t1, t2, out):
    """The three launches as a function of a stream (so they run directly or are captured)."""
    return lambda stream: launch_three(a, b, c, s, t1, t2, out, stream)


def fused_pipeline(a, b, c, s, out):
    return lambda stream: launch_fused(a, b, c, s, out, stream)


def _arrays(n: int = N) -> tuple:
    a, b, c = (cuda.to_device(x) for x in random_inputs(n))
    t1, t2, out = (cuda.device_array(n, np.float32) for _ in range(3))
    return a, b, c, t1, t2, out


def check_capturable(kernel, args):
    """Raise NotCapturable if a launch with these arguments cannot be recorded (the launch watch's check)."""
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"check_capturable needs the launch's arguments as a tuple or a list, got {type(args).__name__}")
    graphs._refuse_host_copies(kernel, args, [host_copy(arg)[1] for arg in args])


def test_check_capturable_refuses_host_arrays_and_hints_and_accepts_device_arrays():
    a, b, *_ = _arrays(8)
    host = np.ones(8, np.float32)
    check_capturable("add_kernel", (a, b, np.float32(2.0), 3))  # device arrays and scalars: fine
    with pytest.raises(graphs.NotCapturable, match=r"argument 2 of add_kernel is a host NumPy array.*cuda.to_device"):
        check_capturable("add_kernel", (a, host))
    for hint in (cuda.In, cuda.Out, cuda.InOut):
        with pytest.raises(graphs.NotCapturable, match=rf"cuda.{hint.__name__} hint"):
            check_capturable("k", (hint(host),))


def test_a_host_array_is_refused_before_anything_is_recorded():
    a, b, c, t1, t2, out = _arrays()
    host_b = np.ones(N, np.float32)
    pipeline = three_pipeline(a, host_b, c, np.float32(2.0), t1, t2, out)
    with pytest.raises(graphs.NotCapturable, match="argument 2 of add_kernel is a host NumPy array"):
        graphs.capture(pipeline)


@in_simulator
def test_capture_in_the_simulator_checks_the_launches_then_says_graphs_need_a_gpu():
    a, b, c, t1, t2, out = _arrays()
    out.copy_to_device(np.full(N, np.nan, np.float32))
    with pytest.raises(graphs.GraphsNeedGPU, match=r"need a GPU.*3 launches \(add_kernel, multiply_kernel, scale_kernel\)"):
        graphs.capture(three_pipeline(a, b, c, np.float32(2.0), t1, t2, out))
    assert np.isnan(out.copy_to_host()).all(), "checking the launches must not run them"
    with pytest.raises(graphs.GraphsNeedGPU):
        graphs.default_stream()


def _missing_stream(a, b, t1):
    def pipeline(stream):
        add_kernel[blocks_for(N), BLOCK_SIZE](a, b, t1)  # no stream: a graph on a GPU would not record it

    return pipeline


@pytest.mark.parametrize("launch", ["no stream", "stream 0"])
def test_a_launch_that_leaves_out_the_pipelines_stream_is_refused_on_either_backend(launch):
    a, b, c, t1, t2, out = _arrays()
    pipeline = _missing_stream(a, b, t1) if launch == "no stream" else (
        lambda stream: add_kernel[blocks_for(N), BLOCK_SIZE, 0](a, b, t1))
    for call in (lambda: graphs.capture(pipeline, warm_up=False), lambda: graphs.counted(pipeline, "x")):
        with pytest.raises(graphs.NotCapturable, match=r"add_kernel was launched on another stream.*"
                                                       r"add_kernel\[grid, block, stream\]"):
            call()


@in_simulator
def test_the_simulator_adopts_the_default_stream_when_asked_as_a_gpu_does():
    a, b, c, t1, t2, out = _arrays()
    with pytest.raises(graphs.GraphsNeedGPU, match=r"The 1 launch \(fused_kernel\) was checked"):
        graphs.capture(lambda stream: run_fused(a, b, c, 2.0, out), adopt_default_stream=True)
    with pytest.raises(graphs.NotCapturable, match="another stream"):
        graphs.capture(lambda stream: run_fused(a, b, c, 2.0, out))


def test_a_pipeline_that_launches_nothing_is_refused_as_on_a_gpu():
    with pytest.raises(ValueError, match="the pipeline made no Numba launches: there is nothing to record"):
        graphs.capture(lambda stream: None, warm_up=False)


def test_counting_a_pipeline_that_launches_nothing_is_refused_on_either_backend():
    with pytest.raises(ValueError, match="the pipeline made no Numba launches: there is nothing to record"):
        graphs.counted(lambda stream: None, "nothing")


@pytest.mark.parametrize("pipeline, message", [
    (None, r"capture needs the pipeline, a function of the stream.*got NoneType"),
    ("three_kernels", r"capture needs the pipeline, .*got str"),
    (lambda: None, r"capture calls the pipeline with one argument, the stream, but <lambda>\(\) cannot take it"),
    (lambda stream, out: None, r"but <lambda>\(stream, out\) cannot take it.*def pipeline\(stream\)"),
])
def test_capture_and_counted_need_a_function_of_a_stream(pipeline, message):
    with pytest.raises(TypeError, match=message):
        graphs.capture(pipeline)
    with pytest.raises(TypeError, match=message.replace("capture", "counted")):
        graphs.counted(pipeline, "x")


def test_check_capturable_needs_the_arguments():
    with pytest.raises(TypeError, match="check_capturable needs the launch's arguments as a tuple or a list, got NoneType"):
        check_capturable("k", None)


@in_simulator
def test_timing_in_the_simulator_gives_no_number_and_says_why(capsys):
    assert graphs.time_calls(lambda: None, None) is None
    assert "need a GPU" in capsys.readouterr().out


def test_the_ledger_counts_the_launches_a_graph_records_as_the_direct_launches():
    a, b, c, t1, t2, out = _arrays()
    with Ledger("direct three") as direct_three:
        run_three_kernels(a, b, c, 2.0, t1, t2, out)
    with Ledger("direct fused") as direct_fused:
        run_fused(a, b, c, 2.0, out)
    three = graphs.counted(three_pipeline(a, b, c, np.float32(2.0), t1, t2, out), "three kernels")
    fused = graphs.counted(fused_pipeline(a, b, c, np.float32(2.0), out), "fused")
    assert (three.trips, three.bytes_per_element()) == (direct_three.trips, direct_three.bytes_per_element())
    assert (fused.trips, fused.bytes_per_element()) == (direct_fused.trips, direct_fused.bytes_per_element())
    assert len(three.launches) == 3 * len(fused.launches)
    assert three.round_trips() == ["t1", "t2"] and fused.round_trips() == []


def test_the_measurement_checks_every_variant_and_its_record_reads_back():
    sizes = [100, 300] if helpers.is_simulator() else [2**10, 2**12]
    record = measure.run(sizes, list(measure.FACTORIES)[:4], repeats=3, arguments=False, progress=False)
    ok = {v.label for v in record.variants if v.status == "ok"}
    assert {lr.DIRECT_THREE, lr.DIRECT_FUSED} <= ok
    checked = {(c.variant, c.n) for c in record.checks if c.passed}
    assert all((label, n) in checked for label in ok for n in [*sizes, max(sizes) - 3])
    assert all(c.poisoned for c in record.checks)
    if helpers.is_simulator():
        assert not record.timings and record.simulated
        graph_rows = [v for v in record.variants if v.graph]
        assert graph_rows and all(v.status == "absent" and "need a GPU" in v.reason for v in graph_rows)
    else:
        assert {lr.GRAPH_THREE, lr.GRAPH_FUSED} <= ok and record.timed(lr.GRAPH_FUSED, sizes[0])
    assert record.pipelines["three kernels"].bytes_per_element == 2 * record.pipelines["fused"].bytes_per_element
    again = results.from_json(lr.LaunchesRun, results.to_json(record))
    assert again.checks == record.checks and again.pipelines == record.pipelines


def _timed(label: str, n: int, ms: float, host_us: float = 5.0) -> lr.Timed:
    return lr.Timed(label, n, [host_us] * 3, [ms] * 3, [ms] * 3, burst=10, hold_us=200.0)


def _record(times: dict[str, list[float]], sizes: list[int]) -> lr.LaunchesRun:
    record = lr.LaunchesRun(simulated=False, note="made up for a test of the claim logic",
                                  settings=lr.Settings(sizes, 3, 50, 10, 1024))
    record.variants = [lr.Variant(label, "fused", 1, False) for label in times]
    record.timings = [_timed(label, n, ms) for label, row in times.items() for n, ms in zip(sizes, row)]
    return record


def test_the_claims_follow_the_data_both_ways():
    sizes = [2**10, 2**28]
    good = _record({lr.GRAPH_FUSED: [0.005, 1.0], lr.DIRECT_THREE: [0.08, 2.7],
                    lr.GRAPH_THREE: [0.01, 2.7], "cupy ElementwiseKernel": [0.011, 1.3]}, sizes)
    lines = {c.claim: c for c in measure.claims(good)}
    assert lines["fused + graph takes no more time than CuPy's one launch at 2^10"].holds is True
    assert lines["fused + graph is no slower than cupy ElementwiseKernel at every n from 2^10 to 2^28"].holds is True
    assert lines["a graph makes the three kernels >= 3x faster at 2^10"].holds is True
    bad = _record({lr.GRAPH_FUSED: [0.02, 1.0], "cupy ElementwiseKernel": [0.011, 0.9]}, sizes)
    claim = next(c for c in measure.claims(bad) if "no slower than cupy" in c.claim)
    assert claim.holds is False and "2^10, 2^28" in claim.note
    assert "no, " in claim.line()


def test_a_peer_beats_fused_graph_only_by_more_than_a_tie():
    sizes = [2**10, 2**20, 2**28]  # the peer: 2% faster (a tie), 2% slower (a tie), 10% faster
    record = _record({lr.GRAPH_FUSED: [0.0100, 0.0100, 1.0], "torch.compile": [0.0098, 0.0102, 0.9],
                      "torch eager": [0.02, 0.02, 2.0]}, sizes)
    assert [report.versus(record, lr.GRAPH_FUSED, "torch.compile", n) for n in sizes] == ["tie", "tie", "faster"]
    assert report.versus(record, lr.GRAPH_FUSED, "torch eager", 2**10) == "slower"
    assert report.peers_against(record) == ["torch.compile against fused + graph: faster at 2^28 (1.11x; GPU time 1.11x); "
                                            "a tie at 2^10, 2^20"]
    spread = record.timed("torch.compile", 2**28)
    spread.loop_ms[:] = [0.7, 0.9, 1.1]  # a spread of repeats wider than the difference: a tie
    assert report.versus(record, lr.GRAPH_FUSED, "torch.compile", 2**28) == "tie"


PACKAGE = "helpers.lessons.launches"


def test_sizes_parse_and_bad_sizes_are_named(capsys):
    parser = cli.parser_for(PACKAGE, "", measure.COMMANDS)
    assert parser.parse_args(["--sizes", "2^10..2^14:2,1000"]).sizes == [1000, 1024, 4096, 16384]
    for bad in ("2^x", "0", "2^14..2^10", "2^40"):  # the last: beyond the simulator, or the GPU's memory
        with pytest.raises(SystemExit):
            cli.parse(PACKAGE, measure.COMMANDS, ["--sizes", bad])
        assert "error:" in capsys.readouterr().err
    assert "compile-ro" in parser.format_help()


def test_the_committed_result_reads_back_when_present():
    path = results.path_of(lr.LaunchesRun)
    if not path.exists():
        pytest.skip(f"{path} not committed yet")
    record = results.load(lr.LaunchesRun)
    assert not record.simulated and record.argument_costs  # a run cut short keeps what it measured
    assert all(c.passed for c in record.checks)
    assert {lr.GRAPH_THREE, lr.GRAPH_FUSED} <= set(record.measured())
    assert all(record.bitwise.values()) and record.bitwise


# --- on a GPU ---------------------------------------------------------------------------------


@on_gpu
def test_a_replay_is_bitwise_the_direct_launches_and_takes_new_inputs_by_copy():
    a, b, c, t1, t2, out = _arrays()
    direct = cuda.device_array(N, np.float32)
    s = np.float32(2.5)
    three_pipeline(a, b, c, s, t1, t2, direct)(0)
    graph = graphs.capture(three_pipeline(a, b, c, s, t1, t2, out))
    out.copy_to_device(np.full(N, np.nan, np.float32))
    cuda.synchronize()
    graph.run()
    assert np.array_equal(out.copy_to_host(), direct.copy_to_host())
    new = random_inputs(N)
    for device_array, host in zip((a, b, c), new):
        graph.copy_into(device_array, host)
    graph.run()
    check_close(out, reference(*new, s))
    with pytest.raises(ValueError, match="capture again"):
        graph.copy_into(a, np.ones(N + 1, np.float32))
    assert [launch.kernel for launch in graph.launches] == ["add_kernel", "multiply_kernel", "scale_kernel"]
    graph.close()


@on_gpu
def test_a_launch_on_another_stream_is_refused_and_the_stream_stays_usable():
    a, b, c, t1, t2, out = _arrays()
    with pytest.raises(graphs.NotCapturable, match="another stream"):
        graphs.capture(lambda stream: add_kernel[2, 256](a, b, t1), warm_up=False)
    with pytest.raises(graphs.NotCapturable, match="host NumPy array"):
        graphs.capture(lambda stream: add_kernel[2, 256, stream](a, np.ones(N, np.float32), t1), warm_up=False)
    graph = graphs.capture(fused_pipeline(a, b, c, np.float32(2.0), out), warm_up=False)
    graph.run()
    check_close(out, reference(*(x.copy_to_host() for x in (a, b, c)), 2.0))
    # code that takes no stream (a library launcher) is recorded when asked to adopt the default stream
    out.copy_to_device(np.full(N, np.nan, np.float32))
    adopted = graphs.capture(lambda stream: run_fused(a, b, c, 3.0, out), adopt_default_stream=True)
    out.copy_to_device(np.full(N, np.nan, np.float32))
    adopted.run()
    check_close(out, reference(*(x.copy_to_host() for x in (a, b, c)), 3.0))
    assert [launch.kernel for launch in adopted.launches] == ["fused_kernel"]
    # later launches without a stream still go to the default stream (Numba shares launch configurations)
    assert int(fused_kernel[blocks_for(N), BLOCK_SIZE].stream.handle) == 0
    a_host = np.ones(N, np.float32)
    fused_kernel[blocks_for(N), BLOCK_SIZE](a_host, b, c, np.float32(1.0), out)  # a host array: a plain launch
    check_close(out, reference(a_host, *(x.copy_to_host() for x in (b, c)), 1.0))


@on_gpu
def test_replays_are_timed_on_their_stream():
    a, b, c, t1, t2, out = _arrays(1024)
    graph = graphs.capture(three_pipeline(a, b, c, np.float32(2.0), t1, t2, out))
    timing = graphs.time_calls(graph.replay, graph.stream, repeats=5, burst=20)
    assert timing is not None and timing.host > 0 and timing.gpu > 0 and timing.loop > 0
    assert len(timing.gpu_ms) == 5 and timing.hold_us >= graphs.MIN_HOLD_US


class _FakeEvent:
    def __init__(self, log: list[str]) -> None:
        import time

        self.at = time.perf_counter()
        log.append("record")

    def sync(self) -> None:
        pass

    def __sub__(self, other: _FakeEvent) -> float:
        return (self.at - other.at) * 1e3


class _FakeStream:
    """Stands in for a cuda.core stream: logs what the timer asks of it."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def sync(self) -> None:
        self.log.append("sync")

    def record(self, options: object = None) -> _FakeEvent:
        assert options == "timing on"
        return _FakeEvent(self.log)


class _FakeHold:
    def __init__(self, stream: _FakeStream) -> None:
        self.stream = stream

    def __getitem__(self, config: tuple) -> object:
        assert config[2] is self.stream, "the hold must go on the stream being timed"
        return lambda iterations: self.stream.log.append(f"hold {iterations}")


def test_the_replay_timer_holds_the_stream_it_times_and_keeps_every_sample(monkeypatch):
    stream = _FakeStream()
    calls = []
    monkeypatch.setattr(graphs, "is_simulator", lambda: False)
    monkeypatch.setattr(graphs, "timing_event_options", lambda: "timing on")
    monkeypatch.setattr(graphs, "us_per_hold_iteration", lambda: 1.0)
    monkeypatch.setattr(graphs, "hold_kernel", lambda: _FakeHold(stream))
    timing = graphs.time_calls(lambda: calls.append(stream.log.append("call")), stream, repeats=4, warmup=2, burst=3)
    assert len(timing.host_us) == 9 and len(timing.loop_ms) == 4 and len(timing.gpu_ms) == 4
    assert len(calls) == 2 + 9 * 3 + 4 + 4
    holds = [entry for entry in stream.log if entry.startswith("hold")]
    assert len(holds) == 4 and timing.hold_us >= graphs.MIN_HOLD_US
    # in the GPU-time repeats the hold comes first, then the start event, the call, the end event
    assert stream.log[-4].startswith("hold") and stream.log[-3:] == ["record", "call", "record"]


@on_gpu
def test_without_the_check_numba_fails_inside_the_capture_on_a_host_array():
    """What the check spares a learner: Numba's implicit copy cannot run on a capturing stream."""
    a, b, c, t1, t2, out = _arrays()
    stream = graphs.default_stream()
    builder = stream.create_graph_builder()
    builder.begin_building()
    try:
        with pytest.raises(Exception, match="capturing stream|capture"):
            add_kernel[2, 256, builder](np.ones(N, np.float32), b, t1)
    finally:
        builder.end_building()
    graph = graphs.capture(fused_pipeline(a, b, c, np.float32(2.0), out))  # the stream still works
    graph.run()
    check_close(out, reference(*(x.copy_to_host() for x in (a, b, c)), 2.0))


@on_gpu
def test_a_one_dimensional_array_becomes_seven_kernel_parameters():
    """Notebook 09 says so when it explains where a launch's host time goes."""
    x = cuda.device_array(8, np.float32)
    kernels.args1[1, 8](x)
    cuda.synchronize()
    kernel = next(iter(kernels.args1.overloads.values()))
    params: list = []
    kernel._prepare_args(kernel.argument_types[0], x, 0, [], params)
    assert len(params) == 7


def test_a_second_run_merges_its_variants_into_the_first():
    sizes = [2**10, 2**28]
    first = _record({lr.GRAPH_FUSED: [0.005, 1.0], "cupy ElementwiseKernel": [0.011, 0.9]}, sizes)
    second = _record({"torch.compile": [0.07, 0.95], "cupy ElementwiseKernel": [0.012, 1.3]}, sizes)
    merged = measure.merge(first, second)
    assert merged.measured() == [lr.GRAPH_FUSED, "torch.compile", "cupy ElementwiseKernel"]
    assert merged.median("cupy ElementwiseKernel", 2**28) == 1.3  # measured again: the new rows replace the old
    assert any("torch.compile" in c.claim for c in merged.claims)


def test_torch_compile_says_how_it_compiles() -> None:
    assert "torch.compile(dynamic=True)" in measure.FACTORIES["torch.compile"][0].note
    per_size = measure.variants(dynamic=False)[lr.RO][0].note
    assert "torch.compile(dynamic=False, mode='reduce-overhead')" in per_size
    assert cli.parse(PACKAGE, measure.COMMANDS, ["--compile-per-size"]).compile_per_size
    assert not cli.parse(PACKAGE, measure.COMMANDS, []).compile_per_size


def test_a_run_compiled_per_size_is_a_record_of_its_own(tmp_path):
    """dynamic=False changes what torch.compile is: such a run never lands in launches.json."""
    sizes = [100] if helpers.is_simulator() else [2**10]
    record = measure.run(sizes, [lr.DIRECT_FUSED], repeats=3, arguments=False, progress=False, dynamic=False)
    assert type(record) is lr.CompiledPerSize and lr.CompiledPerSize.SCHEMA != lr.LaunchesRun.SCHEMA
    path = results.save(record, tmp_path)
    assert path.name == "launches_compiled_per_size.json" and not (tmp_path / "launches.json").exists()
    assert results.load(lr.CompiledPerSize, tmp_path).checks == record.checks
    plain = measure.run(sizes, [lr.DIRECT_FUSED], repeats=3, arguments=False, progress=False)
    assert type(plain) is lr.LaunchesRun
