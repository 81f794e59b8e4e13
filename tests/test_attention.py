"""Attention: both pipelines against float64, causal masking, counts and memory footprint."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers.checks import poisoned
from helpers.launch_hook import on_launch
from helpers.ledger import Ledger
from helpers.lessons.attention import kernels as at
from helpers.lessons.attention import record, report
from helpers.lessons.softmax.record import Measured

from attention_support import inputs, relative_error


@pytest.mark.parametrize("causal", [False, True])
def test_fused_matches_float64(causal):
    q, k, v = inputs(2, 37, 8)  # 37 keys: not a multiple of the 16-row tiles
    out = poisoned(2 * 37 * 8).reshape(2, 37, 8)
    at.run_fused(*(cuda.to_device(a) for a in (q, k, v)), out, causal=causal)
    got = out.copy_to_host()
    assert not np.isnan(got).any()
    assert relative_error(got, at.reference(q, k, v, causal)) < 1e-4


def test_causal_row_zero_is_v_row_zero():
    q, k, v = inputs(1, 20, 4)
    out = poisoned(80).reshape(1, 20, 4)
    at.run_fused(*(cuda.to_device(a) for a in (q, k, v)), out, causal=True)
    assert np.allclose(out.copy_to_host()[0, 0], v[0, 0], rtol=1e-6)


def test_unfused_matches_float64():
    q, k, v = inputs(1, 21, 8)
    s, p = at.unfused_buffers(1, 21)
    out = poisoned(21 * 8).reshape(1, 21, 8)
    at.run_unfused(*(cuda.to_device(a) for a in (q, k, v)), s, p, out)
    assert relative_error(out.copy_to_host(), at.reference(q, k, v)) < 1e-4


def test_counts_scores_and_probabilities_round_trip():
    unfused, fused = Ledger.counted_in_simulator(at.count_ledgers, heads=1, length=20, d=8)
    assert unfused.round_trips() == ["s", "p"]
    assert unfused.bytes_by_array()["s"] == unfused.bytes_by_array()["p"] == 2 * 4 * 20 * 20  # written once, read once
    assert "s" not in fused.bytes_by_array() and fused.trips == 2
    assert fused.bytes_by_array()["out"] == 4 * 20 * 8 and fused.bytes_by_array()["q"] == 4 * 20 * 8
    assert fused.bytes_moved < unfused.bytes_moved


def test_footprint_grows_as_l_squared_only_unfused():
    small, large = at.footprint(64, 1024, 64), at.footprint(64, 4096, 64)
    assert large.unfused_scratch == 16 * small.unfused_scratch
    assert large.inputs_and_output == 4 * small.inputs_and_output
    assert large.fused_scratch == small.fused_scratch == 0


def test_bad_input_is_refused():
    q = cuda.to_device(np.zeros((1, 8, 4), np.float32))
    with pytest.raises(ValueError, match="one shape"):
        at.run_fused(q, q, q, poisoned(64).reshape(1, 8, 8))
    with pytest.raises(ValueError, match=r"\(heads, L, d\)"):
        at.run_fused(poisoned(8), q, q, q)
    with pytest.raises(ValueError, match="multiple of 4"):
        at.flash_kernel(6, at.default_config(), False)


FLOAT32_ONLY = r'''
import re
import helpers
from numba import cuda, float32, boolean
from helpers.lessons.attention import kernels as at
from helpers.lessons.optimizer import kernels as op
from helpers.lessons.softmax import kernels as sm
A, M, V, s = float32[:, :, ::1], float32[:, ::1], float32[::1], float32
kernels = [(at.make_flash_attention_kernel(64, 64, 64, True), (A, A, A, A, s)), (at.scores_kernel, (A, A, M, s, boolean)),
           (at.weighted_sum_kernel, (M, A, A)), (sm.make_softmax_kernel(1000, 128), (M, M)),
           (sm.online_softmax_kernel, (M, M)), (sm.row_max_kernel, (M, V)), (sm.subtract_exp_kernel, (M, V, M)),
           (sm.row_sum_kernel, (M, V)), (sm.divide_kernel, (M, V, M)), (op.adamw_kernel, (V, V, V, V) + (s,) * 7),
           (sm.make_pipelined_softmax_kernel(1000, 128), (M, M))]
for kernel, sig in kernels:
    ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
    print(kernel.py_func.__name__, len(re.findall(r"\.f64\b", ptx)))
    if kernel.py_func.__name__ == "flash_attention_kernel":  # lesson 12: one shared load reads four floats
        print("flash_v4_shared_loads", ptx.count("ld.shared.v4.f32"))
'''


def test_kernels_compile_to_float32_arithmetic_only():
    """A bare -math.inf or 0 in a kernel makes Numba compute in float64, several times slower on a GPU.  And
    lesson 12's fused kernel reads its shared K and V tiles with 16-byte loads (``ld.shared.v4.f32``)."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", FLOAT32_ONLY], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0 and "NVVM" in done.stderr:
        pytest.skip("no NVVM to compile PTX with")
    assert done.returncode == 0, done.stderr[-2000:]
    counts = dict(line.split() for line in done.stdout.strip().splitlines())
    v4 = int(counts.pop("flash_v4_shared_loads"))
    assert len(counts) == 11
    assert all(n == "0" for n in counts.values()), f"float64 instructions in: {counts}"
    assert v4 >= 16, f"the fused attention kernel reads shared memory 16 bytes at a time only {v4} times"


def test_attention_claims_from_the_numbers():
    M = Measured
    row = record.AttentionRow(batch=4, heads=16, length=4096, head_dim=64, flops=2.75e11, unfused_scratch_bytes=0,
                              measured=[M("numba fused q64/k64", 10.0), M("numba fused q128/k64", 8.0),
                                            M("numba unfused (S, P in memory)", 80.0), M("torch naive fp32 (TF32 off)", 12.0)])
    dram = record.AttentionDram(length=4096, heads=16, kernels=[], fused_dram_bytes=1.0, unfused_dram_bytes=25.0,
                                ratio=25.0)
    claims = report.attention_claims(record.AttentionBench(peak_fp32_flops=6.7e13, rows=[row]), dram)
    assert "unfused Numba pipeline at L = 4096: yes, 10.00x" in claims[0]
    assert "naive torch fp32 at L = 4096: yes, 1.50x" in claims[1]
    assert "51% of the FP32 peak" in claims[2]
    assert claims[3].endswith("yes, 25x")


@pytest.mark.parametrize("length, d", [(20, 8), (37, 4)])
def test_predicted_traffic_is_the_simulator_count(length, d):
    unfused, fused = Ledger.counted_in_simulator(at.count_ledgers, heads=1, length=length, d=d)
    predicted = at.predicted_traffic(1, length, d, at.SIMULATOR_CONFIG)  # the shape count_ledgers runs
    assert unfused.bytes_by_array() == predicted.unfused
    assert fused.bytes_by_array() == predicted.fused


@pytest.mark.parametrize("config", [at.FlashConfig(16, 16, 4, 1), at.FlashConfig(16, 16, 2, 4), at.FlashConfig(32, 16, 4, 2)])
@pytest.mark.parametrize("causal", [False, True])
def test_every_block_shape_matches_float64(config, causal):
    q, k, v = inputs(2, 33, 8)
    out = poisoned(2 * 33 * 8).reshape(2, 33, 8)
    at.run_fused(*(cuda.to_device(a) for a in (q, k, v)), out, causal=causal, config=config)
    got = out.copy_to_host()
    assert not np.isnan(got).any() and relative_error(got, at.reference(q, k, v, causal)) < 1e-4


@pytest.mark.skipif(not helpers.is_simulator(), reason="the fused kernel's loops are counted in the simulator")
def test_a_causal_block_reads_only_the_keys_up_to_its_last_row():
    """Block b of 16 query rows needs keys 0 .. 16 (b + 1) - 1 only: 16 + 32 + 48 keys for L = 48, not 3 x 48."""
    from helpers.ledger import Ledger

    q, k, v = (cuda.to_device(a) for a in inputs(1, 48, 8))
    read = {}
    for causal in (False, True):
        with Ledger(f"causal={causal}") as ledger:
            at.run_fused(q, k, v, poisoned(48 * 8).reshape(1, 48, 8), causal=causal, config=at.SIMULATOR_CONFIG)
        read[causal] = {a: ledger.bytes_by_array()[a] for a in ("k", "v")}
    assert read[False] == {"k": 4 * 8 * 3 * 48, "v": 4 * 8 * 3 * 48}
    assert read[True] == {"k": 4 * 8 * (16 + 32 + 48), "v": 4 * 8 * (16 + 32 + 48)}


def test_impossible_block_shapes_are_refused():
    with pytest.raises(ValueError, match="split evenly"):
        at.flash_kernel(8, at.FlashConfig(48, 16, 4, 2), False)
    with pytest.raises(ValueError, match="keys_per_step"):
        at.flash_kernel(8, at.FlashConfig(16, 16, 4, 3), False)


def _qkv(length=40, d=8):
    return [cuda.to_device(a) for a in inputs(1, length, d)]


def test_unfused_causal_matches_float64():
    q, k, v = _qkv(33)
    out = poisoned(33 * 8).reshape(1, 33, 8)
    s, p = at.unfused_buffers(1, 33)
    at.run_unfused(q, k, v, s, p, out, causal=True)
    want = at.reference(q.copy_to_host(), k.copy_to_host(), v.copy_to_host(), causal=True)
    assert np.max(np.abs(out.copy_to_host() - want)) < 1e-5


def test_an_output_that_is_an_input_or_a_host_array_is_refused():
    q, k, v = _qkv()
    out = poisoned(320).reshape(1, 40, 8)
    for name, alias in (("k", k), ("v", v)):
        with pytest.raises(ValueError, match=f"`out` and `{name}` are the same array"):
            at.run_fused(q, k, v, alias)
    at.run_fused(q, k, v, q)  # each thread reads its row of Q before it writes that row
    with pytest.raises(TypeError, match="`q` is a host NumPy array"):
        at.run_fused(q.copy_to_host(), k, v, out)
    s, p = at.unfused_buffers(1, 40)
    with pytest.raises(TypeError, match="`s` must be a device array"):
        at.run_unfused(q, k, v, None, p, out)
    with pytest.raises(TypeError, match="`p` is a host NumPy array"):
        at.run_unfused(q, k, v, s, p.copy_to_host(), out)


def test_settings_are_checked_by_type_and_range():
    q, k, v = _qkv()
    out = poisoned(320).reshape(1, 40, 8)
    with pytest.raises(TypeError, match="`causal` must be True or False, got 'no'"):
        at.run_fused(q, k, v, out, causal="no")
    for field in ("block_q", "block_k", "batch", "keys_per_step"):
        with pytest.raises(ValueError, match=f"`{field}` must be"):
            at.FlashConfig(**{field: 0})
    with pytest.raises(ValueError, match="head size d must be at least 1"):
        at.run_fused(*(cuda.device_array((1, 4, 0), np.float32) for _ in range(4)))
    with pytest.raises(ValueError, match="`heads` must be at least 0"):
        at.footprint(-1, 10, 8)
    with pytest.raises(ValueError, match="`length` must be at least 1"):
        at.predicted_traffic(1, -5, 8)


@pytest.mark.parametrize("heads, length", [(1, 0), (0, 40)])
def test_no_heads_or_no_rows_launch_nothing(heads, length):
    """Nothing to compute, so no launch: a GPU refuses a grid of 0 blocks, in words that name no argument."""
    q, k, v, out = (cuda.device_array((heads, length, 8), np.float32) for _ in range(4))
    s, p = at.unfused_buffers(heads, length)
    grids = []
    with on_launch(lambda call, proceed: grids.append(call.grid) or proceed()):
        at.run_fused(q, k, v, out)
        at.run_unfused(q, k, v, s, p, out)
    assert grids == []


def test_ncu_kernels_go_to_their_pipelines_by_launch_order(monkeypatch):
    """Nine launches, in the workload's order: each pipeline's DRAM bytes are the sum of its own launches; a
    profile with another number of kernels is refused, not guessed."""
    from helpers.lessons.attention import measure
    from helpers.lessons.dram import ncu
    from helpers.lessons.dram.record import KernelCounters

    def fake(count):
        return lambda *args, **kwargs: ([KernelCounters(i, f"k{i}", f"k{i}", "", "", 10.0 * i, 1.0)
                                         for i in range(count)], "")

    monkeypatch.setattr(ncu, "run_ncu", fake(9))
    dram = measure.ncu_attention(64, 2)
    assert dram.pipelines == {"numba unfused fp32": 0 + 10 + 20 + 3, "numba fused fp32": 31, "numba tiled fp32": 41,
                              "numba unfused TF32": 50 + 60 + 70 + 3, "numba TF32 tensor cores": 81}
    assert dram.ratio == pytest.approx(33 / 31)
    monkeypatch.setattr(ncu, "run_ncu", fake(8))
    with pytest.raises(ncu.NcuError, match="profiled 8 kernels; the workload launches 9"):
        measure.ncu_attention(64, 2)


def test_a_causal_kernel_is_credited_only_the_pairs_it_computes():
    """4 d L (L + 1) / 2 multiply-add flops for causal attention, not 4 d L^2: about half, at L = 4096."""
    row = record.AttentionRow(4, 16, 4096, 64, 4.0 * 64 * 4096 ** 2 * 64, 0, [
        Measured("numba fused causal", 1.0), Measured("numba fused q64/k64/b4/s2", 1.0)])
    assert report.flops_of(row, "numba fused causal") == 4 * 64 * 64 * 4096 * 4097 // 2
    assert report.flops_of(row, "numba fused q64/k64/b4/s2") == row.flops
    table = report.attention_table(record.AttentionBench(peak_fp32_flops=None, rows=[row]))
    causal_line = next(line for line in table.splitlines() if "causal" in line)
    full_line = next(line for line in table.splitlines() if "q64/k64" in line)
    assert "137.5" in causal_line and "274.9" in full_line  # TFLOP/s at 1 ms: half the pairs, half the rate


def test_the_steps_plot_draws_each_steps_rate_against_the_peak_and_cublas():
    flops = 4.0 * 64 * 4096 ** 2 * 64
    row = record.AttentionRow(4, 16, 4096, 64, flops, 0, [
        Measured("numba fused q64/k64/b4/s2", 15.0), Measured("numba fused q128/k64/b4/s2", 12.5),
        Measured("numba tiled q64/k32/r4x4", 8.0), Measured("numba tiled causal", 4.0)])
    bench = record.AttentionBench(peak_fp32_flops=6.7e13, rows=[row], sgemm_fp32_flops=5.0e13)
    ax = report.plot_steps(bench).axes[0]
    heights = [round(p.get_height(), 1) for p in ax.patches]
    assert heights == [round(flops / ms / 1e9, 1) for ms in (15.0, 12.5, 8.0)]
    assert sorted(round(line.get_ydata()[0], 1) for line in ax.get_lines()) == [50.0, 67.0]
    with pytest.raises(ValueError, match="times none of"):
        report.plot_steps(record.AttentionBench(peak_fp32_flops=None, rows=[record.AttentionRow(1, 1, 8, 8, 1.0, 0)]))


@pytest.mark.parametrize("causal", [False, True])
def test_the_reference_of_some_rows_is_those_rows_of_the_whole_reference(causal):
    q, k, v = inputs(2, 37, 8)
    rows = np.array([0, 5, 18, 36])
    whole = at.reference(q, k, v, causal)[:, rows]  # equal to rounding: BLAS may order a smaller product differently
    np.testing.assert_allclose(at.reference(q, k, v, causal, rows=rows), whole, rtol=0, atol=1e-12)


def test_the_long_run_checks_sampled_rows_against_float64_and_says_what_the_unfused_pipeline_would_need():
    from helpers.lessons.attention import measure

    rng = np.random.default_rng(1)
    qkv = [rng.standard_normal((2, 40, 16)).astype(np.float32) for _ in range(3)]
    rows = np.array([0, 7, 20, 39])
    for causal in (False, True):
        want = at.reference(*qkv, causal)
        assert measure.sampled_error(want.astype(np.float32), qkv, causal, rows) < 1e-6
        wrong = want.copy()
        wrong[1, 39] += 0.5
        assert measure.sampled_error(wrong, qkv, causal, rows) > 0.1  # a wrong sampled row is seen
    checked = measure.long_implementations([a[:1, :20].copy() for a in qkv])
    names = ["numba tiled", "numba TF32 tensor cores", "numba 3xTF32 tensor cores", "numba 3xTF32 tile sums"]
    assert [impl.name for impl in checked] == names + [name + " causal" for name in names]
    assert all(impl.error() < impl.tolerance for impl in checked[4:])  # the causal ones: each kernel's other path


@pytest.mark.skipif(not helpers.is_simulator(), reason="on a GPU the attention record checks each before timing it")
def test_every_numba_attention_the_record_times_is_right_in_the_simulator():
    """The record's list of Numba attentions (each at the simulator's one shape), checked against float64 at a
    length that is not a multiple of any tile: every entry within its tolerance, tile sums among them."""
    from helpers.lessons.attention import measure

    rng = np.random.default_rng(2)
    qkv = [rng.standard_normal((1, 20, 16)).astype(np.float32) for _ in range(3)]

    def error(got, causal):
        want = at.reference(*qkv, causal)
        return float(np.abs(got - want).max() / np.abs(want).max())

    found = measure.numba_implementations(qkv, error, unfused=False)
    assert {"numba 3xTF32 tile sums w1/k16", "numba 3xTF32 tile sums causal"} <= {impl.name for impl in found}
    for impl in found:
        assert impl.error() < impl.tolerance, impl.name
