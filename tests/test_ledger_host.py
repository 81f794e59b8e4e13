"""The ledger with host NumPy arrays: refused by default, counted as host trips when allowed."""

import numpy as np
import pytest
from numba import cuda

from helpers import checks, pipeline
from helpers.ledger import Ledger, counting_engine
from helpers.sizes import BLOCK_SIZE, blocks_for

N = 300  # not a multiple of the block size
S = np.float32(2.5)


def nan_array():
    return np.full(N, np.nan, dtype=np.float32)


def test_host_arrays_are_refused_by_default_with_the_fix_named():
    a, b = checks.random_inputs(N, count=2)
    t1 = nan_array()
    with pytest.raises(TypeError, match=r"`a` \(argument of add_kernel\) is a host NumPy array.*allow_host_arrays=True"):
        with Ledger("default"):
            pipeline.add_kernel[blocks_for(N), BLOCK_SIZE](a, b, t1)
    assert np.isnan(t1).all()  # refused before anything ran


def test_copy_hints_are_refused_by_default_too():
    a, b = checks.random_inputs(N, count=2)
    with pytest.raises(TypeError, match=r"`a` .*host array in a cuda.In hint"):
        with Ledger("default"):
            pipeline.add_kernel[blocks_for(N), BLOCK_SIZE](cuda.In(a), cuda.to_device(b), checks.poisoned(N))


def test_three_kernels_on_host_arrays_copy_64_bytes_per_element_in_six_host_trips():
    a, b, c = checks.random_inputs(N)
    t1, t2, out = nan_array(), nan_array(), nan_array()
    blocks = blocks_for(N)
    with Ledger("host arrays", allow_host_arrays=True) as ledger:
        pipeline.add_kernel[blocks, BLOCK_SIZE](a, b, t1)
        pipeline.multiply_kernel[blocks, BLOCK_SIZE](t1, c, t2)
        pipeline.scale_kernel[blocks, BLOCK_SIZE](t2, S, out)
    checks.check_close(out, pipeline.reference(a, b, c, S))  # the copies back happened
    # device-memory traffic is counted exactly as for device arrays
    assert ledger.trips == 6 and ledger.bytes_per_element() == 32
    assert [(launch.reads, launch.writes) for launch in ledger.launches] == [
        (["a", "b"], ["t1"]), (["t1", "c"], ["t2"]), (["t2"], ["out"])
    ]
    # every host array is copied in before and out after every launch
    assert [launch.host_trips for launch in ledger.launches] == [2, 2, 2]
    assert ledger.host_trips == 6
    assert [launch.bytes_to_device // N for launch in ledger.launches] == [12, 12, 8]
    assert ledger.bytes_to_device == 32 * N and ledger.bytes_to_host == 32 * N
    assert ledger.host_bytes_per_element() == 64
    assert [copy.name for copy in ledger.launches[0].host_copies] == ["a", "b", "t1"]


def test_in_and_out_hints_copy_only_the_directions_they_name():
    a, b, c = checks.random_inputs(N)
    out = nan_array()
    with Ledger("hints", allow_host_arrays=True) as ledger:
        pipeline.fused_kernel[blocks_for(N), BLOCK_SIZE](cuda.In(a), cuda.In(b), cuda.InOut(c), S, cuda.Out(out))
    checks.check_close(out, pipeline.reference(a, b, c, S))
    copies = {copy.name: (copy.to_device, copy.to_host) for copy in ledger.launches[0].host_copies}
    assert copies == {"a": (4 * N, 0), "b": (4 * N, 0), "c": (4 * N, 4 * N), "out": (0, 4 * N)}
    assert ledger.launches[0].reads == ["a", "b", "c"] and ledger.launches[0].writes == ["out"]
    assert ledger.host_trips == 2 and ledger.trips == 2


def test_only_host_arguments_are_copied_when_mixed_with_device_arrays():
    a, b = checks.random_inputs(N, count=2)
    d_b = cuda.to_device(b)
    t1 = nan_array()
    with Ledger("mixed", allow_host_arrays=True) as ledger:
        pipeline.add_kernel[blocks_for(N), BLOCK_SIZE](a, d_b, t1)
    assert [copy.name for copy in ledger.launches[0].host_copies] == ["a", "t1"]
    assert ledger.bytes_to_device == 8 * N and ledger.bytes_to_host == 8 * N
    checks.check_close(t1, a + b)


def test_report_shows_host_columns_only_when_there_were_host_copies():
    a, b, c = checks.random_inputs(N)
    out = nan_array()
    with Ledger("fused, host", allow_host_arrays=True) as host:
        pipeline.fused_kernel[blocks_for(N), BLOCK_SIZE](a, b, c, S, out)
    assert "host->device B/elem" in host.table().splitlines()[0]
    assert host.summary().splitlines()[1].strip() == (
        "+ 2 host trips: 32 bytes per element over the host link (16 host->device + 16 device->host)"
    )
    d_a, d_b, d_c = (cuda.to_device(x) for x in (a, b, c))
    with Ledger("fused, device", allow_host_arrays=True) as device:
        pipeline.fused_kernel[blocks_for(N), BLOCK_SIZE](d_a, d_b, d_c, S, checks.poisoned(N))
    assert device.host_trips == 0
    assert "host" not in device.table() and "\n" not in device.summary()


def test_an_outer_ledger_that_refuses_host_arrays_wins():
    a, b = checks.random_inputs(N, count=2)
    with pytest.raises(TypeError, match="host NumPy array"):
        with Ledger("outer"), Ledger("inner", allow_host_arrays=True):
            pipeline.add_kernel[blocks_for(N), BLOCK_SIZE](a, b, nan_array())


@pytest.mark.parametrize("engine", ["dynamic", "static"])
def test_host_copies_are_counted_by_both_engines(engine):
    """Also runs on a GPU, where both engines count through the GPU's launch hook."""
    a, b = checks.random_inputs(N, count=2)
    t1 = nan_array()
    with counting_engine(engine), Ledger(engine, allow_host_arrays=True) as ledger:
        pipeline.add_kernel[blocks_for(N), BLOCK_SIZE](a, b, t1)
    checks.check_close(t1, a + b)
    launch = ledger.launches[0]
    assert launch.counted_by == ("ptx" if engine == "static" else "simulator")
    assert [(c.name, c.to_device, c.to_host) for c in launch.host_copies] == [
        ("a", 4 * N, 4 * N), ("b", 4 * N, 4 * N), ("t1", 4 * N, 4 * N)
    ]
    assert ledger.host_trips == 2 and ledger.trips == 2 and ledger.bytes_per_element() == 12
