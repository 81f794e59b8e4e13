"""The three softmax kernels: correct against float64 NumPy, counted by the ledger, bad input refused."""

import dataclasses

import numpy as np
import pytest
from numba import cuda

from helpers import results
from helpers import softmax as sm
from helpers.checks import poisoned
from helpers.lab import reductions


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


def test_large_values_do_not_overflow():
    x = random_matrix(2, 40) + np.float32(1000)  # exp(1000) overflows float32; subtracting the max saves it
    dx, out = cuda.to_device(x), poisoned_matrix(2, 40)
    sm.run_online(dx, out)
    assert np.allclose(out.copy_to_host(), sm.reference(x), rtol=1e-5)


def test_counts():
    unfused, fused, online = sm.count_in_simulator(sm.count_ledgers, rows=4, cols=37)
    assert (unfused.launches, unfused.trips) == (4, 8)
    n = 4 * 37
    # x read twice, e written once and read twice, out written once; plus the per-row max and sum
    assert unfused.bytes_moved == 4 * (2 * n + 3 * n + n) + 4 * 4 * 4
    assert unfused.round_trips == ["row_max", "e", "row_sum"]
    for one in (fused, online):
        assert (one.launches, one.trips, one.bytes_per_element) == (1, 2, 8)
        assert one.round_trips == []


def test_error_detects_unwritten_rows():
    x = random_matrix(4, 37)
    got = sm.reference(x).astype(np.float32)
    got[3, 5] = np.nan
    assert reductions.softmax_error(got, x, np.arange(4)) == np.inf


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
    bench = reductions.bench_softmax([(4, 37)], repeats=1)
    assert all(m.max_rel_err < 1e-5 for m in bench.rows[0].measured)
    assert "numba fused" in reductions.softmax_table(bench)


def fake_softmax_record(fused_ms, torch_ms, unfused_ms):
    measured = [reductions.Measured("numba unfused (4 kernels)", unfused_ms, registers=30, threads_per_block=256),
                reductions.Measured("numba fused, 256 threads/row", fused_ms, registers=32, threads_per_block=256),
                reductions.Measured("torch.softmax", torch_ms)]
    where = dataclasses.replace(results.Provenance.here(), sm_count=132)
    return reductions.SoftmaxBench(copy_ceiling_gbs=4000.0, provenance=where,
                                   rows=[reductions.SoftmaxRow(16384, 4096, 8 * 16384 * 4096, measured)])


def test_claims_say_yes_and_no_from_the_numbers():
    yes = reductions.softmax_claims(fake_softmax_record(0.2, 0.22, 0.9))
    assert yes[0].startswith("fused Numba softmax at least as fast as torch.softmax at 16384 x 4096: yes")
    assert ": yes, 4.50x" in yes[1]
    no = reductions.softmax_claims(fake_softmax_record(0.3, 0.22, 0.6))
    assert ": no, 0.73x" in no[0] and ": no, 2.00x" in no[1]


def test_bytes_in_flight():
    assert reductions.resident_blocks(256, 32) == 8  # thread limit: 2048 / 256
    assert reductions.resident_blocks(256, 128) == 2  # register limit: 65536 / (128 * 256)
    (fused,) = reductions.bytes_in_flight(fake_softmax_record(0.2, 0.22, 0.9))
    assert fused.loads_per_thread == 16 and fused.bytes_in_flight == 132 * 8 * 256 * 16 * 4
    assert fused.implied_latency_us == pytest.approx(fused.bytes_in_flight / (fused.achieved_gbs * 1e3))
    unknown = dataclasses.replace(fake_softmax_record(0.2, 0.22, 0.9), provenance=None)
    with pytest.raises(results.ResultError, match="SM count"):
        reductions.bytes_in_flight(unknown)


def test_records_round_trip_through_json(tmp_path):
    bench = reductions.bench_softmax([(3, 33)], repeats=1)
    bench.rows[0].measured[0].median_ms = 0.5  # as if timed
    path = results.save(bench, folder=tmp_path)
    back = results.load(reductions.SoftmaxBench, folder=tmp_path)
    assert path.name == "reductions_softmax.json"
    assert back.rows[0].measured[0].median_ms == 0.5 and back.rows[0].cols == 33
    ncu = reductions.AttentionDram(length=8, heads=1, kernels=[reductions.KernelDram("flash_attention_kernel", 1.0, 2.0)],
                                   fused_dram_bytes=3.0, unfused_dram_bytes=30.0, ratio=10.0)
    results.save(ncu, folder=tmp_path)
    assert results.load(reductions.AttentionDram, folder=tmp_path).kernels[0].dram_write == 2.0


def test_the_committed_reduction_records_are_drawn_one_point_per_measurement(tmp_path):
    from helpers.lab import reductions

    paths = reductions.save_plots(tmp_path)
    assert [p.name for p in paths] == ["reductions_softmax.png", "reductions_attention.png", "reductions_adamw.png"]
    record = reductions.committed("attention")
    figure = reductions.plot_part("attention", record)
    assert isinstance(record, reductions.AttentionBench)
    assert [len(ax.collections[0].get_offsets()) for ax in figure.axes] == [len(r.measured) for r in record.rows]
