"""The three softmax kernels: correct against float64 NumPy, counted by the ledger, bad input refused."""

import ast
import dataclasses
import types
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32

import helpers
from helpers import results
from helpers.checks import poisoned
from helpers.ledger import Ledger
from helpers.device import resident_blocks_per_sm
from helpers.lessons.attention import record as attention_record
from helpers.lessons.attention import report as attention_report
from helpers.lessons.optimizer import report as optimizer_report
from helpers.lessons.softmax import kernels as sm
from helpers.lessons.softmax import measure, record, report


def random_matrix(rows, cols):
    return (np.random.default_rng().standard_normal((rows, cols)) * 3).astype(np.float32)


def poisoned_matrix(rows, cols):
    return poisoned(rows * cols).reshape(rows, cols)


@pytest.mark.parametrize("rows, cols", [(8, 37), (3, 70), (2, 5)])
@pytest.mark.parametrize("version", ["unfused", "fused", "online", "pipelined"])
def test_softmax_matches_float64(version, rows, cols):
    x = random_matrix(rows, cols)
    dx, out = cuda.to_device(x), poisoned_matrix(rows, cols)
    if version == "unfused":
        sm.run_unfused(dx, poisoned(rows), poisoned_matrix(rows, cols), poisoned(rows), out)
    elif version == "fused":
        sm.run_fused(dx, out)
    elif version == "online":
        sm.run_online(dx, out)
    else:
        sm.run_pipelined(dx, out, blocks=max(1, rows // 3))  # rows not a multiple of the blocks either
    got = out.copy_to_host()
    assert not np.isnan(got).any()
    assert np.max(np.abs(got - sm.reference(x)) / sm.reference(x)) < 1e-5


def test_online_equals_two_pass_within_rounding():
    x = random_matrix(6, 45)
    dx, a, b = cuda.to_device(x), poisoned_matrix(6, 45), poisoned_matrix(6, 45)
    sm.run_fused(dx, a)
    sm.run_online(dx, b)
    assert np.allclose(a.copy_to_host(), b.copy_to_host(), rtol=1e-6, atol=0)


@pytest.mark.parametrize("version", ["unfused", "fused", "online", "pipelined"])
def test_large_values_do_not_overflow(version):
    x = random_matrix(5, 40) + np.float32(1000)  # exp(1000) overflows float32; subtracting the max saves it
    dx, out = cuda.to_device(x), poisoned_matrix(5, 40)
    with np.errstate(over="raise"):  # the simulator computes in Python: an overflow would raise
        if version == "unfused":
            sm.run_unfused(dx, poisoned(5), poisoned_matrix(5, 40), poisoned(5), out)
        elif version == "pipelined":
            sm.run_pipelined(dx, out, blocks=2)
        else:
            getattr(sm, f"run_{version}")(dx, out)
    assert np.allclose(out.copy_to_host(), sm.reference(x), rtol=1e-5)


def test_counts():
    unfused, fused, online = Ledger.counted_in_simulator(sm.count_ledgers, rows=4, cols=37)
    assert (len(unfused.launches), unfused.trips) == (4, 8)
    n = 4 * 37
    # x read twice, e written once and read twice, out written once; plus the per-row max and sum
    assert unfused.bytes_moved == 4 * (2 * n + 3 * n + n) + 4 * 4 * 4
    assert unfused.round_trips() == ["row_max", "e", "row_sum"]
    for one in (fused, online):
        assert (len(one.launches), one.trips, one.bytes_per_element()) == (1, 2, 8)
        assert one.round_trips() == []


@pytest.mark.skipif(not helpers.is_simulator(), reason="a row loop is counted in the simulator (Ledger.counted_in_simulator)")
def test_the_pipelined_kernel_reads_and_writes_each_element_once():
    """Each block walks over rows row, row + grid, ...: no row is done by two blocks."""
    from helpers.ledger import Ledger

    x, out = cuda.to_device(random_matrix(7, 37)), poisoned_matrix(7, 37)
    with Ledger("pipelined") as ledger:
        sm.run_pipelined(x, out, blocks=2)
    assert (ledger.trips, ledger.bytes_by_array()) == (2, {"x": 4 * 7 * 37, "out": 4 * 7 * 37})


def test_error_detects_unwritten_rows():
    rows = measure.Rows(4, 37)
    rows.load_expected(4)
    got = rows.answer.astype(np.float32)
    got[3 * 37 + 5] = np.nan
    assert rows.error(cuda.to_device(got)) == np.inf


def test_bad_input_is_refused():
    with pytest.raises(TypeError, match="float32"):
        sm.run_fused(cuda.to_device(np.zeros((2, 3))), poisoned_matrix(2, 3))
    with pytest.raises(ValueError, match="shape"):
        sm.run_fused(cuda.to_device(random_matrix(2, 3)), poisoned_matrix(3, 2))
    with pytest.raises(ValueError, match="2-D"):
        sm.run_online(poisoned(6), poisoned(6))
    with pytest.raises(ValueError, match="too long"):
        sm.rows_kernel(10_000, 32)
    with pytest.raises(ValueError, match="multiple of 32"):
        sm.rows_kernel(100, 48)


def test_bench_records_and_tables_in_the_simulator():
    bench = measure.bench_softmax([(4, 37)], repeats=1)
    assert all(m.max_rel_err < 1e-5 for m in bench.rows[0].measured)
    assert "numba fused" in report.softmax_table(bench)


def test_a_wrong_softmax_is_kept_in_the_record_untimed_saying_why(monkeypatch):
    four = measure.numba_softmaxes

    def five(cols, variants):
        return {**four(cols, variants), "numba writes nothing": (lambda x, out, *_: None, None, 32)}

    monkeypatch.setattr(measure, "numba_softmaxes", five)
    row = measure.measure_shape(8, 37, repeats=1, variants=False)
    numba = list(four(37, False))
    wrong = row.measured[len(numba)]  # the library peers come after Numba's (on a GPU)
    assert [m.name for m in row.measured][:len(numba) + 1] == [*numba, "numba writes nothing"]
    assert wrong.median_ms is None and wrong.note.startswith("not timed: ") and "never written" in wrong.note
    assert all(m.max_rel_err < 1e-5 for m in row.measured[:len(numba)])


def test_the_shared_loop_checks_at_an_odd_size_first_and_never_times_a_failure():
    def refuse():
        raise RuntimeError("no kernel for these shapes\nmore detail")

    built = []

    def build(n):
        built.append(n)
        return [measure.Implementation("right", lambda: None, lambda: 0.0, 1e-5),
                measure.Implementation("wrong at an odd size", lambda: None, lambda: 1.0 if n % 2 else 0.0, 1e-5),
                measure.Implementation("refuses", lambda: None, refuse, 1e-5),
                measure.Implementation("the reference", lambda: None, lambda: None, 1e-5)]

    rows = {}
    measure.measure_sizes(build, [64, 32], 1, lambda n, measured: rows.__setitem__(n, measured))
    assert built == [61, 64, 32]  # 61: the odd size, checked before anything is timed
    for measured in rows.values():
        right, wrong, refused, reference = measured
        assert right.max_rel_err == 0.0 and not right.note and reference.max_rel_err is None
        assert wrong.median_ms is None and wrong.note == "WRONG, not timed: error 1.0e+00"
        assert refused.median_ms is None and refused.note == "not run: RuntimeError: no kernel for these shapes"


def fake_softmax_record(fused_ms, torch_ms, unfused_ms):
    measured = [record.Measured("numba unfused (4 kernels)", unfused_ms, registers=30, threads_per_block=256),
                record.Measured("numba fused, 256 threads/row", fused_ms, registers=32, threads_per_block=256),
                record.Measured("torch.softmax", torch_ms)]
    where = dataclasses.replace(results.Provenance.here(), sm_count=132)
    return record.SoftmaxBench(copy_ceiling_gbs=4000.0, provenance=where,
                               rows=[record.SoftmaxRow(16384, 4096, 8 * 16384 * 4096, measured)])


def test_claims_say_yes_and_no_from_the_numbers():
    yes = report.softmax_claims(fake_softmax_record(0.2, 0.22, 0.9))
    assert yes[0].startswith("fused Numba softmax at least as fast as torch.softmax at 16384 x 4096: yes")
    assert ": yes, 4.50x" in yes[1]
    no = report.softmax_claims(fake_softmax_record(0.3, 0.22, 0.6))
    assert ": no, 0.73x" in no[0] and ": no, 2.00x" in no[1]


def test_bytes_in_flight():
    assert resident_blocks_per_sm(32, 256) == 8  # thread limit: 2048 / 256
    assert resident_blocks_per_sm(128, 256) == 2  # register limit: 65536 / (128 * 256)
    (fused,) = report.bytes_in_flight(fake_softmax_record(0.2, 0.22, 0.9))
    assert fused.loads_per_thread == 16 and fused.bytes_in_flight == 132 * 8 * 256 * 16 * 4
    assert fused.kib_per_sm == 8 * 256 * 16 * 4 / 1024 == fused.bytes_in_flight / 132 / 1024
    unknown = dataclasses.replace(fake_softmax_record(0.2, 0.22, 0.9), provenance=None)
    with pytest.raises(results.ResultError, match="SM count"):
        report.bytes_in_flight(unknown)


def test_a_16_byte_kernel_counts_float4_loads_and_has_a_column_of_its_own():
    bench = fake_softmax_record(0.2, 0.22, 0.9)
    bench.rows[0].measured.append(record.Measured("numba 16-byte, 256 lanes/row, 2 rows/block", 0.15, registers=40,
                                                  threads_per_block=512))
    vector = report.bytes_in_flight(bench)[-1]
    assert (vector.loads_per_thread, vector.load_bytes) == (4, 16)  # 4096 columns / 4 / 256 lanes, float4s
    assert vector.bytes_in_flight == 132 * resident_blocks_per_sm(40, 512) * 512 * 4 * 16
    header, line = report.softmax_summary_table(bench).splitlines()
    assert "best 16-byte" in header and "(256 lanes x 2)" in line
    assert line.endswith(f"{8 * 16384 * 4096 / 0.15 / 1e6 / 4000:.0%}")  # the fastest Numba kernel's share of the copy


def test_records_round_trip_through_json(tmp_path):
    bench = measure.bench_softmax([(3, 33)], repeats=1)
    bench.rows[0].measured[0].median_ms = 0.5  # as if timed
    path = results.save(bench, folder=tmp_path)
    back = results.load(record.SoftmaxBench, folder=tmp_path)
    assert path.name == "reductions_softmax.json"
    assert back.rows[0].measured[0].median_ms == 0.5 and back.rows[0].cols == 33
    ncu = attention_record.AttentionDram(length=8, heads=1,
                                         kernels=[attention_record.KernelDram("flash_attention_kernel", 1.0, 2.0)],
                                         fused_dram_bytes=3.0, unfused_dram_bytes=30.0, ratio=10.0)
    results.save(ncu, folder=tmp_path)
    assert results.load(attention_record.AttentionDram, folder=tmp_path).kernels[0].dram_write == 2.0


def test_the_committed_reduction_records_are_drawn_one_point_per_measurement(tmp_path):
    paths = [lesson.save_plot(tmp_path) for lesson in (report, attention_report, optimizer_report)]
    assert [p.name for p in paths] == ["reductions_softmax.png", "reductions_attention.png", "reductions_adamw.png"]
    committed = attention_report.committed()
    figure = report.draw(committed, attention_report.title)
    assert isinstance(committed, attention_record.AttentionBench)
    assert [sum(len(c.get_offsets()) for c in ax.collections) for ax in figure.axes] == [
        len(r.measured) for r in committed.rows]


def _refused(kind, words, call):
    with pytest.raises(kind, match=words):
        call()


def test_every_array_argument_is_checked_before_a_launch():
    x = cuda.to_device(random_matrix(4, 37))
    out = poisoned_matrix(4, 37)
    host = random_matrix(4, 37)
    _refused(TypeError, "`x` is a host NumPy array", lambda: sm.run_fused(host, out))
    _refused(TypeError, "`out` is a host NumPy array", lambda: sm.run_online(x, host.copy()))
    rows = lambda n, dtype=np.float32: cuda.device_array(n, dtype)  # noqa: E731
    unfused = lambda **kw: sm.run_unfused(**{"x": x, "row_max": rows(4), "e": poisoned_matrix(4, 37),  # noqa: E731
                                             "row_sum": rows(4), "out": out, **kw})
    _refused(TypeError, "`row_sum` must be float32, got int32", lambda: unfused(row_sum=rows(4, np.int32)))
    _refused(ValueError, r"`row_max` must have shape \(4,\)", lambda: unfused(row_max=rows(3)))
    _refused(ValueError, r"`e` must have shape \(4, 37\)", lambda: unfused(e=poisoned_matrix(4, 36)))
    _refused(TypeError, "`e` must be a device array, got NoneType", lambda: unfused(e=None))
    _refused(ValueError, "`e` and `x` are the same array", lambda: unfused(e=x))
    unfused(out=x)  # out may be x: x is last read before out is first written


def test_threads_and_blocks_are_whole_numbers_in_range():
    x, out = cuda.to_device(random_matrix(4, 37)), poisoned_matrix(4, 37)
    _refused(TypeError, "`threads` must be a whole number, got '64'", lambda: sm.run_fused(x, out, threads="64"))
    _refused(ValueError, "multiple of 32", lambda: sm.run_online(x, out, threads=48))
    unfused = lambda threads: sm.run_unfused(x, poisoned(4), poisoned_matrix(4, 37), poisoned(4), out,  # noqa: E731
                                             threads=threads)
    _refused(ValueError, "multiple of 32", lambda: unfused(48))  # in the simulator too, which runs 32 a row
    _refused(TypeError, "`threads` must be a whole number, got '64'", lambda: unfused("64"))
    _refused(ValueError, "`blocks` must be at least 1", lambda: sm.run_pipelined(x, out, blocks=-1))
    _refused(ValueError, "`n_cols` must be at least 1", lambda: sm.rows_kernel(0, 32))
    _refused(ValueError, "2-D matrix", lambda: sm.reference(np.ones(5)))
    _refused(ValueError, "`rows` must be at least 1, got 0", lambda: sm.count_ledgers(rows=0))


def test_a_block_that_does_not_fit_on_an_sm_is_explained():
    from helpers.device import launch_problem

    assert launch_problem(1024, 64, 0, 65536, 49152) is None
    too_many = launch_problem(1024, 255, 0, 65536, 49152)
    assert "1024 threads x 255 registers" in too_many and "at most 256 threads" in too_many
    assert launch_problem(800, 82, 0, 65536, 49152) is not None  # 82 rounds up to 88 per thread: 70400 > 65536
    assert "shared memory" in launch_problem(32, 8, 50000, 65536, 49152)


on_gpu = pytest.mark.skipif(helpers.is_simulator(), reason="needs a GPU")


@on_gpu
@pytest.mark.parametrize("rows, cols, run", [(2, 65536, sm.run_fused), (3, 12345, sm.run_pipelined)])
def test_launches_beyond_the_sms_registers_are_refused_or_run(rows, cols, run):
    """On an H200 these shapes once failed with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES."""
    from helpers.device import LaunchTooLarge

    x = random_matrix(rows, cols)
    out = poisoned_matrix(rows, cols)
    try:
        run(cuda.to_device(x), out)
    except LaunchTooLarge as refusal:
        assert "registers" in str(refusal) and "run_online" in str(refusal)
        return
    assert np.max(np.abs(out.copy_to_host() - sm.reference(x)) / sm.reference(x)) < 1e-5


def _check_block_reductions(reductions, threads):
    """``reductions``' block_max, block_sum and block_merge over one block of ``threads``, against NumPy."""
    block_max, block_sum, block_merge = reductions.block_max, reductions.block_sum, reductions.block_merge

    @cuda.jit
    def reduce_kernel(values, out):
        scratch = cuda.shared.array(32, float32)
        scratch_s = cuda.shared.array(32, float32)
        v = values[cuda.threadIdx.x]
        biggest = block_max(v, scratch)
        cuda.syncthreads()
        total = block_sum(v, scratch)
        cuda.syncthreads()
        m, s = block_merge(v, float32(1), scratch, scratch_s)
        if cuda.threadIdx.x == 0:
            out[0], out[1], out[2], out[3] = biggest, total, m, s

    values = np.random.default_rng().permutation(threads).astype(np.float32)  # exact in float32
    out = cuda.device_array(4, np.float32)
    reduce_kernel[1, threads](cuda.to_device(values), out)
    biggest, total, m, s = out.copy_to_host()
    assert biggest == values.max() and total == values.sum() and m == values.max()
    assert s == pytest.approx(np.exp(values.astype(np.float64) - values.max()).sum(), rel=1e-5)


@on_gpu
@pytest.mark.parametrize("threads", [32, 64, 96, 128, 256, 512, 1024])
def test_the_gpu_block_reductions_combine_every_warp(threads):
    """block_max, block_sum and block_merge use warp shuffles on a GPU only (the simulator has stand-ins)."""
    _check_block_reductions(sm, threads)


def _gpu_reductions_in_the_simulator(monkeypatch):
    """The GPU's block_max, block_sum and block_merge, from the branch of the kernels module that the simulator
    skips, made to run here. The simulator has no warp shuffle: a stand-in passes each lane's value through
    shared memory (every lane of the block shuffles together, as in these reductions)."""
    from numba.cuda.simulator import kernelapi  # there is no simulator to patch on a GPU

    def shfl_xor_sync(fake_cuda, mask, value, offset):
        lanes = fake_cuda.shared.array(sm.MAX_THREADS, float32)  # one array per block (keyed by this line)
        lanes[fake_cuda.threadIdx.x] = value
        fake_cuda.syncthreads()
        partner = lanes[fake_cuda.threadIdx.x ^ offset]
        fake_cuda.syncthreads()  # read before the next shuffle writes
        return partner

    monkeypatch.setattr(kernelapi.FakeCUDAModule, "shfl_xor_sync", shfl_xor_sync, raising=False)
    tree = ast.parse(Path(sm.__file__).read_text())
    gpu = next(node for node in tree.body
               if isinstance(node, ast.If) and ast.unparse(node.test) == "not is_simulator()")
    namespace = dict(vars(sm))  # the module's names; the GPU definitions replace the stand-ins in this copy only
    exec(compile(ast.Module(gpu.body, type_ignores=[]), sm.__file__, "exec"), namespace)
    return types.SimpleNamespace(**{name: namespace[name] for name in ("block_max", "block_sum", "block_merge")})


@pytest.mark.skipif(not helpers.is_simulator(), reason="on a GPU the test above runs the reductions themselves")
@pytest.mark.parametrize("threads", [32, 64, 96])
def test_the_gpu_block_reductions_combine_every_warp_with_a_stand_in_shuffle(monkeypatch, threads):
    """The GPU reductions' warp-combining loops, checked without a GPU (with 64 threads and more, warp 1 counts)."""
    _check_block_reductions(_gpu_reductions_in_the_simulator(monkeypatch), threads)


def test_a_time_with_the_hosts_cost_in_it_says_so_in_the_records_note():
    from helpers.lessons.softmax.measure import HOST_TIME_IN_IT, measured
    from helpers.timing import Timing

    hidden, idle = Timing("a", [1.0], launch_hidden=True), Timing("b", [1.0], launch_hidden=False)
    assert measured("a", hidden, 0.0, "16-byte").note == "16-byte"
    assert measured("b", idle, 0.0, "16-byte").note == f"16-byte; {HOST_TIME_IN_IT}"
    assert measured("c", idle, 0.0).note == HOST_TIME_IN_IT
    assert measured("d", Timing("d", [1.0]), 0.0).note == ""  # not said: nothing claimed
