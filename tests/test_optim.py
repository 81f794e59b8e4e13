"""AdamW: fused and unfused steps against float64, counted trips, settings checked."""

import numpy as np
import pytest
from numba import cuda

from helpers.ledger import Ledger
from helpers.lessons.optimizer import kernels as op
from helpers.lessons.optimizer import report
from helpers.lessons.optimizer.record import AdamWBench, AdamWRow
from helpers.lessons.softmax.record import Measured


def state(n):
    rng = np.random.default_rng()
    return (rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32),
            (rng.standard_normal(n) * 0.1).astype(np.float32), (rng.random(n) * 0.01).astype(np.float32))


def close(got, want):
    return np.max(np.abs(got - want)) / np.max(np.abs(want)) < 1e-6


@pytest.mark.parametrize("version", ["fused", "unfused"])
def test_step_matches_float64(version):
    p, g, m, v = state(300)
    opt = op.AdamW(lr=1e-2)
    want = op.reference(p, g, m, v, opt, step=3)
    dp, dg, dm, dv = (cuda.to_device(a) for a in (p, g, m, v))
    if version == "fused":
        op.run_fused(dp, dg, dm, dv, opt, 3)
    else:
        op.run_unfused(dp, dg, dm, dv, cuda.device_array(300, np.float32), opt, 3)
    for got, ref in zip((dp, dm, dv), want):
        assert close(got.copy_to_host(), ref)


def test_list_of_tensors_is_the_flat_buffer():
    sizes = [5, 40, 300]
    p, g, m, v = state(sum(sizes))
    opt = op.AdamW()
    flat = [cuda.to_device(a) for a in (p, g, m, v)]
    op.run_fused(*flat, opt, 1)
    pieces = [cuda.to_device(a) for a in (p, g, m, v)]
    edges = np.r_[0, np.cumsum(sizes)]
    views = [[a[edges[i]:edges[i + 1]] for i in range(len(sizes))] for a in pieces]
    op.run_fused_list(*views, opt, 1)
    for a, b in zip(flat, pieces):
        assert np.array_equal(a.copy_to_host(), b.copy_to_host())


def test_counts():
    n = 300
    dp, dg, dm, dv = (cuda.to_device(a) for a in state(n))
    denom = cuda.device_array(n, np.float32)
    opt = op.AdamW()
    with Ledger("unfused") as unfused:
        op.run_unfused(dp, dg, dm, dv, denom, opt, 1)
    with Ledger("fused") as fused:
        op.run_fused(dp, dg, dm, dv, opt, 1)
    assert (len(fused.launches), fused.trips, fused.bytes_per_element()) == (1, 2, 28)
    assert len(unfused.launches) == 8 and unfused.trips == 16
    assert unfused.bytes_per_element() == 80
    assert set(unfused.round_trips()) >= {"p", "m", "v", "denom"}


def test_bad_settings_and_steps():
    with pytest.raises(ValueError, match="beta1"):
        op.AdamW(beta1=1.0)
    for field, value in (("eps", -1e-8), ("weight_decay", -0.1)):
        with pytest.raises(ValueError, match=f"{field} must not be negative"):
            op.AdamW(**{field: value})
    for field in ("lr", "eps", "weight_decay", "beta1"):
        for value in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match=f"`{field}` is"):
                op.AdamW(**{field: value})
        with pytest.raises(TypeError, match=f"`{field}` must be a number"):
            op.AdamW(**{field: "0.1"})
    for step in (float("nan"), 1.5, float("inf"), True, "3", None):
        with pytest.raises(TypeError, match="`step` must be a whole number"):
            op.AdamW().scalars(step)
    with pytest.raises(ValueError, match="steps count from 1"):
        op.AdamW().scalars(0)
    with pytest.raises(ValueError):
        op.mixed_sizes(10, 100)


def test_mixed_sizes_span_orders_of_magnitude():
    sizes = op.mixed_sizes(200, 2**26)
    assert len(sizes) == 200 and max(sizes) / min(sizes) > 100
    assert abs(sum(sizes) - 2**26) < 2**26 * 0.01


def test_adamw_claims_from_the_numbers():
    def record(ours, theirs):
        return AdamWBench(rows=[AdamWRow("one tensor", 1, 2**26, 28 * 2**26, [
            Measured("numba fused (one launch per tensor)", ours),
            Measured("torch AdamW fused=True", theirs)])])

    assert report.adamw_claims(record(0.52, 0.5))[0].endswith("yes, 1.04x its time")
    assert report.adamw_claims(record(0.6, 0.5))[0].endswith("no, 1.20x its time")


def test_launch_story_from_the_numbers():
    record = AdamWBench(rows=[AdamWRow("list", 200, 200 * 1000, 28 * 200 * 1000, [
        Measured("numba fused (one launch per tensor)", 2.5),
        Measured("numba fused, one launch over a flat buffer", 0.5),
        Measured("numba unfused (8 launches per tensor)", 20.0)])])
    lines = report.adamw_launches(record)
    assert "each launch costs about 10.0 µs beyond the bytes" in lines[0]
    assert "1600 launches (unfused): 20.000 ms, 40x" in lines[1]


def test_arrays_a_step_writes_must_be_distinct_and_checked():
    p, g, m, v = (cuda.to_device(a) for a in state(300))
    opt = op.AdamW()
    with pytest.raises(ValueError, match="same array"):
        op.run_fused(p, g, m, m, opt, 1)
    for denom, name in ((v, "v"), (g, "g")):
        with pytest.raises(ValueError, match=f"`denom` and `{name}` are the same array"):
            op.run_unfused(p, g, m, v, denom, opt, 1)
    with pytest.raises(TypeError, match="`opt` must be an AdamW"):
        op.run_fused(p, g, m, v, None, 1)
    short = cuda.to_device(np.ones(100, np.float32))
    with pytest.raises(ValueError, match="different lengths"):
        op.run_fused_list([p], [short], [m], [v], opt, 1)
    with pytest.raises(TypeError, match=r"`params\[0\]` is a host NumPy array"):
        op.run_fused_list([p.copy_to_host()], [g], [m], [v], opt, 1)
    with pytest.raises(TypeError, match="must be a list of device arrays"):
        op.run_fused_list(p, g, m, v, opt, 1)
    with pytest.raises(TypeError, match="`count` must be a whole number"):
        op.mixed_sizes(2.5)
    with pytest.raises(ValueError, match="`smallest` must be at least 1"):
        op.mixed_sizes(10, 10_000, smallest=0)


def test_list_of_tensors_follows_the_step_after_the_first():
    sizes = [5, 40, 300]
    p, g, m, v = state(sum(sizes))
    edges = np.r_[0, np.cumsum(sizes)]
    opt = op.AdamW()
    views = [[cuda.to_device(a[edges[i]:edges[i + 1]]) for i in range(len(sizes))] for a in (p, g, m, v)]
    want = (p, m, v)
    for step in (1, 2, 3):
        op.run_fused_list(*views, opt, step)
        want = op.reference(want[0], g, want[1], want[2], opt, step)
    got = np.concatenate([a.copy_to_host() for a in views[0]])
    assert np.allclose(got, want[0], rtol=1e-5, atol=1e-7)


def test_a_claim_that_sets_host_time_against_gpu_time_says_so():
    from helpers.lessons.optimizer import report
    from helpers.lessons.optimizer.record import AdamWBench, AdamWRow
    from helpers.lessons.softmax.record import HOST_TIME_IN_IT, Measured

    def bench(note):
        return AdamWBench(rows=[AdamWRow("list", 200, 1000, 28000, [
            Measured(report.PER_TENSOR, 13.0, note=note), Measured("torch AdamW fused=True", 0.6)])])

    assert report.adamw_claims(bench(HOST_TIME_IN_IT))[0].endswith("21.67x its time (host time in ours, not in torch's)")
    assert report.adamw_claims(bench(""))[0].endswith("21.67x its time")
