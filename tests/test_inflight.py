"""The bytes-in-flight model (helpers/lessons/inflight/): its arithmetic, its kernels, its record, its tables."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers import pipeline, results
from helpers.checks import poisoned, random_inputs
from helpers.counting import simulated_traffic, static_traffic
from helpers.counting.ptx import compile_ptx, describe_arg
from helpers.counting.record import CannotAttribute, LinkedCall
from helpers.ledger import Ledger
from helpers.harness.campaign import odd_size
from helpers.harness.cli import main_of
from helpers.harness.peers import Unavailable
from helpers.lessons.inflight import kernels, measure, model, report
from helpers.lessons.inflight.record import BytesInFlight, ChasePoint, KernelPoint, OpLatency, PipelinePoint, ProbePoint
from helpers.lessons.roofline import roofline
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import Timing

# --- occupancy from registers, and bytes in flight ------------------------------------------------


@pytest.mark.parametrize("registers, threads", [
    (None, 2048),  # no count: the thread limit alone
    (19, 2048),  # 19 x 32 = 608 -> 768 per warp, 85 warps fit: the 64-warp thread limit binds
    (32, 2048),  # 1024 per warp: exactly 64 warps
    (40, 1536),  # 1280 per warp: 51 warps -> 6 blocks of 8 warps
    (64, 1024),  # 2048 per warp: 32 warps -> 4 blocks
    (255, 256),  # 8192 per warp: 8 warps -> 1 block
])
def test_threads_per_sm_follow_the_register_file(registers, threads):
    assert model.threads_per_sm(registers) == threads


def test_a_resident_grid_caps_the_blocks_per_sm():
    assert model.threads_per_sm(19, blocks_launched_per_sm=3) == 3 * 256
    assert model.threads_per_sm(64, blocks_launched_per_sm=8) == 1024  # only 4 fit
    with pytest.raises(ValueError, match="at least 1"):
        model.threads_per_sm(19, blocks_launched_per_sm=0)


def test_bytes_in_flight_per_sm():
    assert model.bytes_in_flight_per_sm(3, 4, 2048) == 24 * 1024  # the fused kernel, one float per array
    assert model.bytes_in_flight_per_sm(3, 16, 2048) == 96 * 1024  # with float4 accesses
    with pytest.raises(ValueError, match="threads"):
        model.bytes_in_flight_per_sm(1, 4, 4096)
    with pytest.raises(ValueError, match="loads_per_thread"):
        model.bytes_in_flight_per_sm(0, 4, 256)


def test_littles_law_and_its_inverse():
    # 132 SMs with 24 KiB of reads each outstanding for 1000 ns: bytes per ns are GB/s
    reads_only = model.littles_law_gbs(24 * 1024, 132, 1000.0)
    assert reads_only == pytest.approx(132 * 24 * 1024 / 1000.0)
    assert model.littles_law_gbs(24 * 1024, 132, 1000.0, reads=3, writes=1) == pytest.approx(reads_only * 4 / 3)
    assert model.implied_latency_ns(24 * 1024, 132, reads_only) == pytest.approx(1000.0)
    assert model.littles_law_gbs(8192, 132, 500.0) == pytest.approx(2 * model.littles_law_gbs(8192, 132, 1000.0))
    with pytest.raises(ValueError):
        model.littles_law_gbs(1024, 132, 0.0)


# --- the curve and the prediction ------------------------------------------------------------------


def _probe(reads=3, width=4, q=1024, gbs=100.0, ok=True, **kw):
    return ProbePoint(reads=reads, width_bytes=width, unroll=1, blocks_per_sm=1, registers=20,
                      threads_per_sm=256, loads_per_thread=reads, bytes_in_flight_per_sm=q, n=1 << 20,
                      median_ms=1.0, iqr_ms=0.01, gbs=gbs, bitwise_equal=ok, **kw)


def test_curve_merges_equal_bytes_in_flight_and_drops_wrong_probes():
    probes = [_probe(q=1024, gbs=100), _probe(q=1024, gbs=120), _probe(q=1024, gbs=110), _probe(q=2048, gbs=200),
              _probe(q=4096, gbs=9999, ok=False), _probe(reads=1, q=4096, gbs=50), _probe(width=16, q=8192, gbs=400)]
    assert model.curve_points(probes, 3, 4) == [(1024.0, 110.0), (2048.0, 200.0)]
    assert model.curve_points(probes, 3) == [(1024.0, 110.0), (2048.0, 200.0), (8192.0, 400.0)]
    assert model.curve_points(probes, 1) == [(4096.0, 50.0)]
    assert model.curve_points(probes, 2) == []


def test_prediction_reads_the_curve_in_log_bytes():
    points = [(1024.0, 100.0), (4096.0, 300.0), (16384.0, 400.0)]
    assert model.predict_gbs(points, 2048) == pytest.approx(200.0)  # halfway in log2
    assert model.predict_gbs(points, 4096) == pytest.approx(300.0)
    assert model.predict_gbs(points, 512) == pytest.approx(50.0)  # below: in proportion (latency fixed)
    assert model.predict_gbs(points, 1 << 20) == pytest.approx(400.0)  # above: the device's limit
    assert model.predict_gbs([], 1024) is None
    dip = [(1024.0, 100.0), (2048.0, 300.0), (4096.0, 250.0), (8192.0, 400.0)]
    assert model.predict_gbs(dip, 4096) == pytest.approx(300.0)  # a dip does not lower the curve
    with pytest.raises(ValueError):
        model.predict_gbs(points, 0)


def test_percent_off():
    assert model.percent_off(110.0, 100.0) == pytest.approx(10.0)
    assert model.percent_off(None, 100.0) is None
    assert model.percent_off(1.0, 0.0) is None


# --- the kernels, in the simulator at tiny sizes -------------------------------------------------


@pytest.mark.parametrize("reads", model.READS)
@pytest.mark.parametrize("width", model.WIDTHS)
@pytest.mark.parametrize("unroll", [1, 4])
def test_probe_writes_the_sum_of_its_inputs(reads, width, unroll):
    n = 1004  # not a multiple of the block, nor of 4 x grid
    host = random_inputs(n, seed=reads * 10 + unroll)
    x, y, z = (cuda.to_device(h) for h in host)
    out = poisoned(n)
    kernels.run_probe(reads, width, unroll, 2, x, y, z, out)
    assert np.array_equal(out.copy_to_host(), kernels.probe_expected(*host, reads))


def test_probe_source_issues_every_load_before_a_store():
    source = kernels.probe_source(3, 16, 4)
    body = source.split("while j + 3 * stride < groups:")[1].split("j += 4 * stride")[0]
    lines = [s.strip() for s in body.strip().splitlines()]
    assert sum("load4(" in s for s in lines) == 12 and sum("store4(" in s for s in lines) == 4
    assert max(i for i, s in enumerate(lines) if "load4(" in s) < min(i for i, s in enumerate(lines) if "store4(" in s)


def test_probe_rejects_what_it_cannot_do():
    x = cuda.to_device(np.ones(10, np.float32))
    with pytest.raises(ValueError, match="multiple of 4"):
        kernels.run_probe(1, 16, 1, 1, x, x, x, poisoned(10))
    with pytest.raises(ValueError, match="no probe"):
        kernels.probe_kernel(4, 4, 1)


@pytest.mark.parametrize("order", ["random", "page_local"])
def test_chase_buffer_is_one_cycle_through_every_line(order):
    stride = 256
    footprint = 3 * kernels.PAGE_BYTES + 64 * stride  # three pages and part of a fourth
    buffer, start = kernels.chase_buffer(footprint, stride, order, seed=1)
    lines = footprint // stride
    seen, j = set(), start
    for _ in range(lines):
        assert j % (stride // 4) == 0, "a pointer lands inside a line"
        seen.add(j)
        j = int(buffer[j])
    assert j == start and len(seen) == lines


def test_page_local_order_stays_inside_each_page():
    order = kernels.chase_order(lines=40, lines_per_page=16, order="page_local", rng=np.random.default_rng(0))
    assert sorted(order) == list(range(40))
    assert [int(v) // 16 for v in order] == sorted(int(v) // 16 for v in order)  # pages in order
    assert list(order[:16]) != list(range(16))  # shuffled inside the page
    with pytest.raises(ValueError, match="order"):
        kernels.chase_order(4, 4, "sequential", np.random.default_rng(0))


def test_chase_kernel_follows_the_pointers():
    buffer, start = kernels.chase_buffer(64 * 128, 128, "random", seed=3)
    out = cuda.device_array(1, dtype=np.int32)
    kernels.chase_kernel[1, 1](cuda.to_device(buffer), start, 77, out)
    assert int(out.copy_to_host()[0]) == kernels.chase_reference(buffer, start, 77)
    assert kernels.chase_reference(buffer, start, 77) != start


@pytest.mark.parametrize("n", [1, 3, 5, 1001])
def test_the_two_three_kernel_pipelines_are_bitwise_equal_to_numpy(n):
    host = random_inputs(n, seed=n)
    a, b, c = (cuda.to_device(h) for h in host)
    want = pipeline.reference(*host, 1.7)
    for run in (pipeline.run_three_kernels, kernels.run_three_vec4):
        t1, t2, out = poisoned(n), poisoned(n), poisoned(n)
        run(a, b, c, 1.7, t1, t2, out)
        assert np.array_equal(out.copy_to_host(), want), run.__name__


def test_vector_three_kernels_refuse_a_misaligned_view():
    host = random_inputs(9, seed=2)
    a, b, c = (cuda.to_device(h) for h in host)
    if helpers.is_simulator():
        pytest.skip("the simulator's arrays are host memory; alignment is checked on the GPU path")
    with pytest.raises(roofline.MisalignedArray):
        kernels.run_three_vec4(a[1:], b[1:], c[1:], 1.7, poisoned(8), poisoned(8), poisoned(8))


def test_each_kernels_mix_is_what_the_ledger_counts():
    """Every kernel's bytes as the ledger counts them.  The linked CUDA C variant runs on a GPU only,
    and there the ledger does not count it: its compiled code calls a CUDA C function the counter
    cannot see, and the refusal names that function."""
    n = 203
    host = random_inputs(n, seed=4)
    a, b, c = (cuda.to_device(h) for h in host)
    t, out = poisoned(n), poisoned(n)
    table = kernels.kernel_launchers(a, b, c, 1.7, t, out)
    for name, shape in {**model.SHAPES, **model.DIAGNOSTICS}.items():
        if name not in table:  # the linked CUDA C runs on a GPU only
            assert roofline.VARIANT_INFO[name].gpu_only and helpers.is_simulator()
            continue
        _, _, launch, want = table[name]
        with Ledger(name) as ledger:
            launch()
        assert np.array_equal(out.copy_to_host(), want), name
        if name in roofline.VARIANT_INFO and roofline.VARIANT_INFO[name].gpu_only:
            _assert_the_linked_function_is_named(ledger, name)
            continue
        assert ledger.bytes_read == 4 * n * shape.reads, name
        assert ledger.bytes_written == 4 * n * shape.writes, name


def _assert_the_linked_function_is_named(ledger, name):
    """The launch ran and is recorded, with the static counter's refusal; asking for a count raises it."""
    [launch] = ledger.launches
    assert isinstance(launch.refusal, LinkedCall), (name, launch.uncounted)
    assert "`fused_vec4`" in launch.uncounted and "compiled from CUDA C" in launch.uncounted, launch.uncounted
    with pytest.raises(LinkedCall, match="fused_vec4"):
        ledger.bytes_read
    with pytest.raises(LinkedCall, match=f"{launch.kernel}: .*`fused_vec4`"):
        ledger.require_counted()


def test_shapes_name_every_series_kernel_and_variant():
    assert set(roofline.VARIANTS) <= set(model.SHAPES)
    assert {"add", "multiply", "scale", "copy"} <= set(model.SHAPES)
    for name, v in roofline.VARIANT_INFO.items():
        assert model.SHAPES[name].width_bytes == 4 * v.elements_per_access
    for _, names, _ in model.PIPELINES.values():
        assert set(names) <= set(model.SHAPES)


# --- the record -------------------------------------------------------------------------------------


def _record() -> BytesInFlight:
    probes = [_probe(reads=r, width=w, q=q * w, gbs=g * r)
              for r in (1, 2, 3) for w in (4, 16) for q, g in ((256, 500.0), (1024, 1500.0), (4096, 1800.0))]
    series = [KernelPoint(name="naive", family="fused", reads=3, writes=1, width_bytes=4, groups_in_flight=1,
                          grid="full", registers=19, threads_per_sm=2048, loads_per_thread=3,
                          bytes_in_flight_per_sm=2048, n=1000, median_ms=1.0, gbs=4000.0, bitwise_equal=True),
              KernelPoint(name="vec4", family="notebook 07", reads=3, writes=1, width_bytes=16,
                          groups_in_flight=1, grid="full", bytes_in_flight_per_sm=None, n=1000,
                          error="RuntimeError: x")]
    chase = [ChasePoint(footprint_bytes=1 << 30, stride_bytes=128, order="page_local", steps=10,
                        ns_per_load=600.0, samples_ns=[600.0]),
             ChasePoint(footprint_bytes=1 << 28, stride_bytes=128, order="page_local", steps=10,
                        ns_per_load=550.0, samples_ns=[550.0])]
    pipes = [PipelinePoint(name="fused, 4-byte", width_bytes=4, kernels=["naive"], bytes_per_element=16,
                           n=1000, median_ms=0.5, bitwise_equal=True)]
    return BytesInFlight(sms=132, block_size=256, repeats=3, n_probe=1 << 20, n_kernels=1000,
                         datasheet_gbs=4800.0, chase=chase, probes=probes, kernels=series, pipelines=pipes,
                         library_copy_gbs=4000.0, blocks_per_sm_seen={1: [1, 1], 8: [8, 8]})


def test_record_round_trip(tmp_path):
    record = measure.with_claims(_record())
    path = results.save(record, folder=tmp_path)
    back = results.load(BytesInFlight, folder=tmp_path)
    assert path.name == "bytes_in_flight.json"
    assert back == record
    assert back.blocks_per_sm_seen == {1: [1, 1], 8: [8, 8]}
    assert back.provenance is not None and back.provenance.device


def test_record_answers_the_models_questions():
    record = _record()
    assert record.dram_latency_ns() == 600.0  # the largest footprint
    assert record.best_gbs(1) == 4000.0  # the library copy beats the 1:1 probes here
    assert record.best_gbs(3) == 3 * 1800.0
    naive = record.kernel("naive")
    # 2048 B in flight on the 4-byte, 3-read curve: halfway (in log2) between (1024, 1500) and (4096, 4500)
    assert record.predicted_gbs(naive) == pytest.approx(3000.0)
    assert record.predicted_gbs(record.kernel("vec4")) is None  # not measured: no prediction
    with pytest.raises(KeyError, match="measured: naive, vec4"):
        record.kernel("tiled")
    claims = measure.with_claims(record).claims
    assert claims[0].holds is False and "-25.0%" in claims[0].note
    assert claims[1].holds is None
    assert math.isclose(report.pipeline_prediction_ms(record, "fused, 4-byte"),
                        4 * 1000 * 4 / (3000.0 * 1e9) * 1e3)


@pytest.mark.skipif(not helpers.is_simulator(), reason="the simulator's answer")
def test_entry_point_measures_nothing_in_the_simulator(capsys):
    assert main_of("helpers.lessons.inflight", measure.COMMANDS, []) == 0
    assert "nothing measured" in capsys.readouterr().out
    with pytest.raises(Unavailable, match="GPU"):
        measure.measure_latency()


def test_committed_result_covers_every_kernel():
    try:
        record = results.load(BytesInFlight)
    except results.ResultError:
        pytest.skip("no committed bytes-in-flight result yet")
    assert [k.name for k in record.kernels] == list(model.SHAPES)
    assert all(k.bitwise_equal for k in record.kernels if k.error is None)
    assert record.dram_latency_ns() and record.dram_latency_ns() > 100


def test_the_tables_the_notebook_prints():
    record = _record()
    occupancy = report.occupancy_table(record)
    assert "naive" in occupancy and "2048" in occupancy and "2 KiB" in occupancy
    table, hits, total = report.prediction_table(record)
    assert (hits, total) == (0, 1) and "vec4            not measured (RuntimeError: x)" in table
    assert "-25.0%" in table
    chase = report.chase_table(record)
    assert "1 GiB" in chase and "256 MiB" in chase and "600" in chase
    # 4000 GB/s read+write at 3:1 is 3000 GB/s of reads; x 600 ns / 132 SMs
    assert report.needed_in_flight_per_sm(record, 4000.0) == pytest.approx(3000.0 * 600 / 132)
    loaded = report.loaded_latency_table(record, reads=3, width=4).splitlines()
    # 1 KiB per SM at 1500 GB/s (1125 GB/s of reads) on 132 SMs: 132 x 1024 / 1125 = 120 ns
    assert loaded[2].split() == ["1", "KiB", "1500", "120", "ns"]


def test_two_by_two_ratios():
    record = _record()
    record.pipelines = [PipelinePoint(name=name, width_bytes=w, kernels=k, bytes_per_element=b, n=1000,
                                      median_ms=ms, bitwise_equal=True)
                        for (name, (w, k, b)), ms in zip(model.PIPELINES.items(), (0.6, 0.25, 0.5, 0.25))]
    ratios = report.two_by_two(record)
    assert ratios.fusion_4_byte == pytest.approx(2.4)
    assert ratios.fusion_16_byte == pytest.approx(2.0)
    assert ratios.width_three_kernels == pytest.approx(1.2)
    assert ratios.width_fused == pytest.approx(1.0)
    assert ratios.both == pytest.approx(2.4)
    claims = measure.with_claims(record).claims
    assert [c.holds for c in claims[-2:]] == [False, True]


def test_chase_latency_reads_only_uncached_samples():
    old = ChasePoint(footprint_bytes=1 << 30, stride_bytes=128, order="page_local", steps=10,
                     ns_per_load=157.0, samples_ns=[345.0, 157.0, 157.0])
    assert old.latency_ns() == 345.0  # the repeats after the first re-walked lines already in the L2
    new = ChasePoint(footprint_bytes=1 << 30, stride_bytes=128, order="page_local", steps=10,
                     ns_per_load=344.0, samples_ns=[345.0, 344.0, 343.0], fresh=True)
    assert new.latency_ns() == 344.0


def test_same_in_flight_table_compares_with_the_matching_probe():
    record = _record()
    record.kernels[0].bytes_in_flight_per_sm = 1024  # the 4-byte, 3-read probe at 1 KiB reached 1500 GB/s
    table = report.same_in_flight_table(record)
    assert "naive" in table and "1500 GB/s (kernel +166.7%)" in table


# --- the second term: arithmetic between a load's arrival and the store --------------------------

F32_OP = re.compile(r"\b(add|sub|mul|div|fma)(?:\.rn|\.full|\.approx)?(?:\.ftz)?\.f32\b")
PTX_NAMES = {"add": "add", "mul": "mul", "div": "div"}
# 16-byte and cache-hinted accesses (load4, load_cs, ...) are intrinsics a subprocess compile cannot carry
INTRINSIC = {"streaming", "vec4", "vec4_resident", "vec4_streaming", "add_vec4", "multiply_vec4", "scale_vec4"}


def test_each_kernels_chain_is_the_float_arithmetic_in_its_compiled_code():
    """The operations the model charges a kernel for are the float32 operations its PTX performs."""
    n = 203
    a, b, c = (cuda.to_device(h) for h in random_inputs(n, seed=4))
    t, out = poisoned(n), poisoned(n)
    table = kernels.kernel_launchers(a, b, c, 1.7, t, out)
    checked = []
    for name, shape in {**model.SHAPES, **model.DIAGNOSTICS}.items():
        if name not in table:  # the linked CUDA C runs on a GPU only
            continue
        kernel, args, _, _ = table[name]
        try:
            ptx = compile_ptx(kernel, [describe_arg(x) for x in args], cc=(9, 0))
        except CannotAttribute as why:
            assert name in INTRINSIC and "cannot carry" in str(why), (name, why)
            continue
        checked.append(name)
        seen = {m.group(1) for m in F32_OP.finditer(ptx)}
        assert seen == {PTX_NAMES[op] for op in shape.chain}, (name, seen, shape.chain)
        if "div" in shape.chain:
            assert "div.rn.f32" in ptx, name  # IEEE division, not an approximation
    assert {"add", "multiply", "scale", "copy", "naive", "grid_stride", "ilp4", "scale_by_reciprocal"} <= set(checked)


@pytest.mark.parametrize("op", sorted(kernels.CHAINS))
def test_chain_kernels_match_numpy_step_by_step(op):
    kernel, operand = kernels.CHAINS[op]
    x = cuda.to_device(np.ones(1, dtype=np.float32))
    out = poisoned(1)
    kernel[1, 1](x, np.float32(operand), 3, out)
    assert out.copy_to_host()[0] == kernels.chain_reference(op, 1.0, operand, 3)
    assert kernels.chain_reference(op, 1.0, operand, 3) != np.float32(1.0)  # the chain did something


def test_average_in_flight_factor():
    assert model.average_in_flight_factor(750.0, 0.0) == 1.0
    assert model.average_in_flight_factor(750.0, 250.0) == pytest.approx(0.75)
    assert model.average_in_flight_factor(100.0, -20.0) == pytest.approx(1.25)
    with pytest.raises(ValueError, match="positive"):
        model.average_in_flight_factor(0.0, 1.0)
    with pytest.raises(ValueError, match="more than"):
        model.average_in_flight_factor(100.0, -100.0)


def test_arithmetic_lowers_the_prediction_by_the_time_it_adds_per_trip():
    record = _record()
    naive = record.kernel("naive")
    curve_only = record.predicted_gbs(naive)
    assert record.arithmetic_ns(naive) is None  # no latencies measured: the curve alone
    record.op_latency = [OpLatency(op="add", ops=8, ns_per_op=2.0, bitwise_equal=True),
                         OpLatency(op="mul", ops=8, ns_per_op=2.0, bitwise_equal=True),
                         OpLatency(op="div", ops=8, ns_per_op=30.0, bitwise_equal=True)]
    # naive: add, mul, div (34 ns) minus the 3-read probe's two additions (4 ns)
    assert record.arithmetic_ns(naive) == pytest.approx(30.0)
    latency = record.loaded_latency_ns(naive)
    assert latency == pytest.approx(132 * 2048 / (3000.0 * 3 / 4))
    assert record.predicted_gbs(naive) == pytest.approx(curve_only * latency / (latency + 30.0))
    assert record.predicted_gbs(naive, arithmetic=False) == curve_only
    record.op_latency[2].bitwise_equal = False  # a wrong chain is not used
    assert record.arithmetic_ns(naive) is None


@pytest.mark.parametrize("name", sorted(set(roofline.VARIANT_INFO) - {"linked_cuda_c"}))
def test_every_variants_compiled_code_counts_what_the_simulator_counts(name):
    """The roofline variants' PTX, as the GPU compiles them (vector loads, `mov.pred` of a constant,
    64-bit bitwise comparisons), counted for every thread: the simulator's count, at sizes that are
    not a multiple of four or of the block (an H200 run found the vector kernels refused here)."""
    variant = roofline.VARIANT_INFO[name]
    ptx = roofline.ptx_evidence(name).ptx
    for n in (203, 1027):
        a, b, c = (cuda.to_device(h) for h in random_inputs(n, seed=4))
        out = poisoned(n)
        args, names = (a, b, c, np.float32(1.7), out), ["a", "b", "c", "s", "out"]
        grid = blocks_for(max(n // 4, 3)) if "vec4" in name else blocks_for(n)
        static = static_traffic(variant.kernel, grid, BLOCK_SIZE, args, names, ptx=ptx)
        simulated = simulated_traffic(variant.kernel, grid, BLOCK_SIZE, args, names)
        assert static.per_array() == simulated.per_array() == {"a": (4 * n, 0), "b": (4 * n, 0), "c": (4 * n, 0),
                                                               "out": (0, 4 * n)}, (name, n)


# --- the measurement's plumbing, in the simulator with a stand-in timer ------------------------------


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """In the simulator: let the GPU-only measurements run, timing each workload as 1 ms."""
    if not helpers.is_simulator():
        pytest.skip("stands in for the GPU's clock in the simulator")
    timed = []

    def stand_in_timer(run, *, label="", repeats=1, **_):
        run()
        timed.append(label)
        return Timing(label, [1.0])

    monkeypatch.setattr(measure, "require_gpu", lambda what: None)
    monkeypatch.setattr(measure, "time_gpu", stand_in_timer)
    return timed


def test_every_kernel_is_checked_at_an_odd_size_then_at_n_before_it_is_timed(stand_in_gpu):
    n = 203
    rows = {row.name: row for row in measure.measure_kernels(n, repeats=1, log=lambda line: None)}
    assert list(rows) == list(model.SHAPES)
    assert rows["linked_cuda_c"].error and rows["linked_cuda_c"].gbs is None  # GPU only: never timed
    measured = [name for name in model.SHAPES if name != "linked_cuda_c"]
    assert stand_in_gpu == measured and all(rows[name].bitwise_equal for name in measured)
    assert rows["naive"].gbs == pytest.approx(4 * n * 4 / 1e-3 / 1e9)  # 16 bytes an element in 1 ms
    assert rows["ilp4"].bytes_in_flight_per_sm == 12 * 4 * rows["ilp4"].threads_per_sm


def test_a_wrong_corner_of_the_2x2_keeps_its_reason_and_is_not_timed(stand_in_gpu, monkeypatch):
    monkeypatch.setattr(measure, "run_three_vec4", lambda a, b, c, s, t1, t2, out: None)  # writes nothing
    rows = {row.name: row for row in measure.measure_pipelines(203, repeats=1)}
    assert stand_in_gpu == ["three kernels, 4-byte", "fused, 4-byte", "fused, 16-byte"]
    wrong = rows["three kernels, 16-byte"]
    assert wrong.bitwise_equal is False and f"n={odd_size([203])}" in wrong.error and wrong.median_ms is None
    assert all(rows[name].bitwise_equal and rows[name].median_ms == 1.0 for name in stand_in_gpu)
