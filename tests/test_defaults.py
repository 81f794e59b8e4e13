"""Defaults are the measured best: the softmax's threads per row and the fused attention's block shape are the
fastest the committed H200 records timed, chosen by a rule this file checks against those records."""

import json
from pathlib import Path

import pytest

from helpers import results
from helpers.lessons.attention import kernels as at
from helpers.lessons.softmax import kernels as sk

H200 = Path(__file__).resolve().parent.parent / "results" / "h200"


def committed(name):
    return json.loads((H200 / f"{name}.json").read_text())


def test_the_softmax_default_is_the_fastest_committed_block_size_at_each_row_length():
    by_cols = {}
    for row in committed("reductions_softmax")["rows"]:
        timed = {int(m["name"].split(", ")[1].split()[0]): m["median_ms"] for m in row["measured"]
                 if m["name"].startswith("numba fused, ") and m["name"].endswith("threads/row") and m["median_ms"]}
        if row["rows"] >= by_cols.get(row["cols"], (0, None))[0]:
            by_cols[row["cols"]] = (row["rows"], min(timed, key=timed.get))
    assert by_cols, "the committed softmax record times no row-in-registers kernel"
    for cols, (_, fastest) in by_cols.items():
        assert sk.measured_default_threads(cols) == fastest


def test_between_committed_lengths_the_nearest_decides_and_a_row_too_long_gets_none():
    assert sk.measured_default_threads(2048) == sk.measured_default_threads(4096)  # a tie: the longer row
    assert sk.measured_default_threads(37) == sk.measured_default_threads(1024)
    assert sk.measured_default_threads(64 * sk.measured_default_threads(4096) + 1) is None  # would not fit


def test_the_attention_default_is_the_fastest_committed_block_shape_at_the_longest_sequence():
    rows = sorted(committed("reductions_attention")["rows"], key=lambda row: row["length"])
    timed = {m["name"]: m["median_ms"] for m in rows[-1]["measured"]
             if m["name"].startswith("numba fused q") and m["median_ms"]}
    q, k, b, s = (int(part[1:]) for part in min(timed, key=timed.get).split()[-1].split("/"))
    assert at.measured_default_config() == at.FlashConfig(q, k, b, s)


def test_on_a_gpu_the_measured_shape_is_used_where_it_fits_the_head_size(monkeypatch):
    monkeypatch.setattr(at, "is_simulator", lambda: False)
    best = at.measured_default_config()
    assert at.default_config(64) == best
    assert not at.fits(best, 4) and at.default_config(4) == at.FlashConfig()  # 64 x 4 floats: not 128 x 4 batches


def test_without_a_committed_record_the_rules_fall_back(monkeypatch):
    def missing(cls, folder=None):
        raise results.ResultError("no such result")

    monkeypatch.setattr(results, "load", missing)
    for cached in (sk._measured_threads, at.measured_default_config):
        cached.cache_clear()
    try:
        assert sk.measured_default_threads(4096) is None and at.measured_default_config() is None
    finally:
        for cached in (sk._measured_threads, at.measured_default_config):
            cached.cache_clear()


@pytest.mark.parametrize("cols", [1024, 4096])
def test_the_default_threads_hold_the_row(cols):
    threads = sk.measured_default_threads(cols)
    assert threads % 32 == 0 and cols <= 64 * threads


def test_the_new_kernels_take_the_committed_fastest_shape_once_a_record_times_them(monkeypatch):
    """The tiled, tensor-core and 16-byte softmax defaults follow the same rule, read from records that time them
    (here made up: each names one shape fastest, which then becomes the default on a GPU)."""
    from helpers.lessons.attention import record, tensor_cores, tiled
    from helpers.lessons.softmax import record as srecord
    from helpers.lessons.softmax import vector

    def row(names_ms):
        return [srecord.Measured(name, ms, max_rel_err=3e-6) for name, ms in names_ms]

    attention = record.AttentionBench(peak_fp32_flops=None, rows=[
        record.AttentionRow(4, 16, 1024, 64, 1.0, 0, row([("numba tiled q32/k32/r4x4", 1.0)])),
        record.AttentionRow(4, 16, 4096, 64, 1.0, 0, row([
            ("numba tiled q64/k32/r4x4", 9.0), ("numba tiled q64/k16/r4x2", 8.0), ("numba tiled causal", 1.0),
            ("numba TF32 tensor cores w4/k64", 2.0), ("numba TF32 tensor cores w8/k32", 1.5),
            ("numba TF32 tensor cores w8/k32 b2", 1.2), ("numba 3xTF32 tile sums w2/k32", 3.0),
            ("numba 3xTF32 tensor cores w4/k64 prefetch", 4.0), ("numba 3xTF32 tensor cores w2/k32", 6.0), ("numba 3xTF32 tensor cores w4/k32", 7.0),
            ("numba TF32 tensor cores causal", 0.5)])
            + [srecord.Measured("numba 3xTF32 tensor cores w8/k64", 2.5, max_rel_err=3.6e-5)])])
    soft = srecord.SoftmaxBench(copy_ceiling_gbs=None, rows=[srecord.SoftmaxRow(4096, 4096, 0, row([
        ("numba 16-byte, 128 lanes/row, 1 rows/block", 0.05), ("numba 16-byte, 64 lanes/row, 2 rows/block", 0.04)]))])
    made_up = {record.AttentionBench: attention, srecord.SoftmaxBench: soft}
    monkeypatch.setattr(results, "load", lambda cls, folder=None: made_up[cls])
    for module in (tiled, tensor_cores, vector):
        monkeypatch.setattr(module, "is_simulator", lambda: False)
    caches = (tiled.measured_tiled_config, tensor_cores.measured_config, vector._measured)
    for cached in caches:
        cached.cache_clear()
    try:
        assert tiled.default_tiled_config(64) == tiled.TiledConfig(64, 16, 4, 2)
        assert tensor_cores.default_config(1, 64) == tensor_cores.TensorCoreConfig(8, 32, 1, min_blocks=2)
        # three passes: the fastest within 1e-5 of float64 (w8/k64 is faster, but 3.6e-5 off), here with tile sums
        assert tensor_cores.default_config(3, 64) == tensor_cores.TensorCoreConfig(2, 32, 3, tile_sums=True)
        del attention.rows[1].measured[6]  # without them, the fastest accurate shape prefetches
        tensor_cores.measured_config.cache_clear()
        assert tensor_cores.default_config(3, 64) == tensor_cores.TensorCoreConfig(4, 64, 3, prefetch=True)
        assert vector.default_vector_config(4096) == vector.VectorConfig(64, 2)
        assert vector.default_vector_config(40000) == vector.VectorConfig(1024, 1)  # 64 lanes cannot hold it
    finally:
        for cached in caches:
            cached.cache_clear()
