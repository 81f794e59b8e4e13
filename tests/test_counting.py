"""The static (PTX) count and the simulator count agree, launch by launch, array by array.

Both count the distinct elements each thread reads and writes (see helpers.counting).
The kernels below are chosen to break a naive counter: a repeated read, a
grid-stride loop, a 2-D index, two outputs, neighbouring elements, and kernels
whose traffic depends on data (which must come back as "cannot attribute").
"""

import numpy as np
import pytest
from numba import cuda

from helpers import ledger, pipeline
from helpers.checks import random_inputs
from helpers.counting import (
    compare_counts,
    comparison_table,
    simulated_traffic,
    static_traffic,
)
from helpers.counting.ptx import CannotAttribute, count_global_accesses
from helpers.lessons.dram.measure import pipeline_comparisons
from helpers.sizes import BLOCK_SIZE, blocks_for
from corpus_support import shapes

N = 300  # not a multiple of the block size: the bounds guard matters


read_twice = shapes.read_twice  # out = x * x + x: three reads of one element
neighbours = shapes.neighbours_unguarded_offset  # out = x[i] + x[i + 1]: reads one past the guard


@cuda.jit
def read_twice_around_a_store(a, copy, out):
    i = cuda.grid(1)
    if i < out.size:
        copy[i] = a[i]
        out[i] = a[i] + 1.0  # copy may alias a, so the compiler loads a[i] again


@cuda.jit
def grid_stride(a, b, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = a[i] + b[i]


@cuda.jit
def two_d(a, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = 2 * a[i, j]


@cuda.jit
def two_outputs(a, b, total, difference):
    i = cuda.grid(1)
    if i < total.size:
        total[i] = a[i] + b[i]
        difference[i] = a[i] - b[i]


@cuda.jit
def neighbours_guarded(x, out):
    i = cuda.grid(1)
    if i + 1 < x.size:
        out[i] = x[i] + x[i + 1]


@cuda.jit
def copy_positive(x, out):
    i = cuda.grid(1)
    if i < x.size:
        if x[i] > 0:
            out[i] = x[i]


def device(*arrays):
    return [cuda.to_device(a) for a in arrays]


def one_d_cases():
    a, b, c = device(*random_inputs(N + 1, count=3, seed=3))
    a, b = a[:N], b[:N]
    o1, o2 = device(np.zeros(N, np.float32), np.zeros(N, np.float32))
    return {
        "read twice": (read_twice, blocks_for(N), BLOCK_SIZE, (a, o1)),
        "read twice around a store": (read_twice_around_a_store, blocks_for(N), BLOCK_SIZE, (a, o1, o2)),
        "neighbours": (neighbours, blocks_for(N), BLOCK_SIZE, (c, o1)),
        "grid-stride, fewer threads than elements": (grid_stride, 2, 64, (a, b, o1)),
        "grid-stride, more threads than elements": (grid_stride, 3, 128, (a, b, o1)),
        "two outputs": (two_outputs, blocks_for(N), BLOCK_SIZE, (a, b, o1, o2)),
    }


# What each case must count, worked out by hand: (bytes read, bytes written) per argument.
EXPECTED = {
    "read twice": {"arg0": (4 * N, 0), "arg1": (0, 4 * N)},
    "read twice around a store": {"arg0": (4 * N, 0), "arg1": (0, 4 * N), "arg2": (0, 4 * N)},
    "neighbours": {"arg0": (8 * N, 0), "arg1": (0, 4 * N)},
    "grid-stride, fewer threads than elements": {"arg0": (4 * N, 0), "arg1": (4 * N, 0), "arg2": (0, 4 * N)},
    "grid-stride, more threads than elements": {"arg0": (4 * N, 0), "arg1": (4 * N, 0), "arg2": (0, 4 * N)},
    "two outputs": {"arg0": (4 * N, 0), "arg1": (4 * N, 0), "arg2": (0, 4 * N), "arg3": (0, 4 * N)},
}


@pytest.mark.parametrize("case", list(one_d_cases()))
def test_static_and_simulated_counts_agree_on_tricky_kernels(case):
    kernel, grid, block, args = one_d_cases()[case]
    result = compare_counts(kernel, grid, block, args)
    assert result.cannot_attribute is None
    assert (result.static.method, result.simulated.method) == ("ptx", "simulator")
    assert result.static.per_array() == result.simulated.per_array() == EXPECTED[case], case
    assert result.agree


def test_a_2d_index_agrees_and_clips_each_dimension():
    a, out = device(np.ones((20, 30), np.float32), np.zeros((20, 30), np.float32))
    result = compare_counts(two_d, (3, 4), (8, 8), (a, out), ["a", "out"])
    assert result.static.per_array() == result.simulated.per_array() == {"a": (2400, 0), "out": (0, 2400)}


def test_reading_an_element_twice_is_one_load():
    (a, out) = one_d_cases()["read twice"][3]
    # the compiler already keeps a[i] in a register: one ld.global for three reads
    counts = count_global_accesses(read_twice, (a, out))
    assert sum(1 for x in counts.instructions if x.op == "load") == 1
    assert static_traffic(read_twice, blocks_for(N), BLOCK_SIZE, (a, out), ["a", "out"]).read == {"a": 4 * N, "out": 0}


def test_a_reload_the_compiler_kept_is_still_one_load():
    (a, copy, out) = one_d_cases()["read twice around a store"][3]
    counts = count_global_accesses(read_twice_around_a_store, (a, copy, out))
    assert sum(1 for x in counts.instructions if x.op == "load") == 2  # two ld.global in the PTX
    assert counts.loads(0) == 1  # the same address: one element, counted once


def test_neighbouring_elements_are_two_loads():
    x, out = one_d_cases()["neighbours"][3]
    t = static_traffic(neighbours, blocks_for(N), BLOCK_SIZE, (x, out), ["x", "out"])
    assert t.read["x"] == 2 * 4 * N  # x has N + 1 elements; the guard checks out.size


def test_grid_stride_loop_counts_every_element_once_whatever_the_grid():
    a, b, out = one_d_cases()["grid-stride, fewer threads than elements"][3]
    for grid, block in [(1, 32), (2, 64), (5, 128)]:
        t = static_traffic(grid_stride, grid, block, (a, b, out), ["a", "b", "out"])
        assert t.per_array() == {"a": (4 * N, 0), "b": (4 * N, 0), "out": (0, 4 * N)}


def test_a_guard_with_an_offset_is_counted_exactly():
    x, out = device(np.ones(N, np.float32), np.zeros(N, np.float32))
    result = compare_counts(neighbours_guarded, blocks_for(N), BLOCK_SIZE, (x, out), ["x", "out"])
    # i + 1 < n lets N - 1 threads through; each reads x[i] and x[i + 1]
    assert result.static.per_array() == result.simulated.per_array() == {"x": (8 * (N - 1), 0), "out": (0, 4 * (N - 1))}


@pytest.mark.parametrize("kernel, reason", [(shapes.scatter, "data-dependent index"), (copy_positive, "data-dependent branch")])
def test_data_dependent_traffic_cannot_be_attributed(kernel, reason):
    x = cuda.to_device(np.linspace(-1, 1, N).astype(np.float32))
    out = cuda.to_device(np.zeros(N, np.float32))
    idx = cuda.to_device(np.arange(N)[::-1].copy())
    args = (x, idx, out) if kernel is shapes.scatter else (x, out)
    with pytest.raises(CannotAttribute, match=reason):
        static_traffic(kernel, blocks_for(N), BLOCK_SIZE, args)
    result = compare_counts(kernel, blocks_for(N), BLOCK_SIZE, args)
    assert result.static is None and not result.agree
    assert reason in result.cannot_attribute
    assert "cannot attribute" in comparison_table([result], N)


def test_every_pipeline_kernel_agrees_and_matches_the_ledger():
    rows = pipeline_comparisons(N, seed=1)
    assert [r.kernel for r in rows] == ["add_kernel", "multiply_kernel", "scale_kernel", "fused_kernel"]
    assert all(r.agree for r in rows), comparison_table(rows, N)
    per_element = [(r.static.bytes_read / N, r.static.bytes_written / N) for r in rows]
    assert per_element == [(8, 4), (8, 4), (4, 4), (12, 4)]
    # the ledger's simulator count (count 2 as the notebooks use it) says the same
    a, b, c = device(*random_inputs(N, count=3, seed=1))
    t1, t2, out = device(*(np.zeros(N, np.float32) for _ in range(3)))
    with ledger.Ledger("three") as three:
        pipeline.run_three_kernels(a, b, c, 2.5, t1, t2, out)
    with ledger.Ledger("fused") as fused:
        pipeline.run_fused(a, b, c, 2.5, out)
    launches = three.launches + fused.launches
    assert [(x.bytes_read, x.bytes_written) for x in launches] == [
        (r.static.bytes_read, r.static.bytes_written) for r in rows
    ]


def test_host_arrays_are_refused_by_the_simulator_count():
    a = np.ones(N, np.float32)
    with pytest.raises(TypeError, match="host"):
        simulated_traffic(read_twice, blocks_for(N), BLOCK_SIZE, (a, a))


def test_the_gpu_path_runs_the_simulator_count_in_a_subprocess():
    from helpers.counting import traffic as counting

    a, out = one_d_cases()["read twice"][3]
    here = counting.simulated_traffic(read_twice, blocks_for(N), BLOCK_SIZE, (a, out), ["a", "out"])
    there = counting._simulate_in_subprocess(read_twice, blocks_for(N), BLOCK_SIZE, (a, out), ["a", "out"])
    assert there.per_array() == here.per_array() == {"a": (4 * N, 0), "out": (0, 4 * N)}


def test_launch_dims_drop_numbas_padding_but_keep_real_dimensions():
    from helpers.counting import launch_dims

    assert launch_dims((4, 1, 1), (256, 1, 1)) == ((4,), (256,))
    assert launch_dims(1, 256) == ((1,), (256,))
    assert launch_dims((1, 1, 1), (1, 1, 1)) == ((1,), (1,))
    assert launch_dims((4, 3, 1), (16, 16, 1)) == ((4, 3), (16, 16))
    assert launch_dims((4, 1), (16, 16)) == ((4, 1), (16, 16))  # block y > 1: a real 2-D launch


@cuda.jit
def copy_unguarded(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


def test_an_index_past_the_end_is_not_recorded_as_another_element():
    from helpers.counting.traffic import _flat_elements

    assert _flat_elements((5,), 7).size == 0  # not element 7 % 5 = 2
    assert _flat_elements((5,), -1).tolist() == [4]  # a negative index wraps, as in Python
    x, out = device(np.ones(N, np.float32), np.zeros(N, np.float32))
    with pytest.raises(IndexError):
        simulated_traffic(copy_unguarded, blocks_for(N), BLOCK_SIZE, (x, out))


def test_the_gpu_path_raises_what_the_simulator_raises(monkeypatch):
    """On a GPU the count runs in a simulator subprocess: its errors come back as the same kinds."""
    from helpers.counting import traffic as counting

    x, out = device(np.ones(N, np.float32), np.zeros(N, np.float32))
    with pytest.raises(IndexError, match="out of bounds"):
        counting._simulate_in_subprocess(copy_unguarded, blocks_for(N), BLOCK_SIZE, (x, out), ["x", "out"])
    monkeypatch.setattr(counting, "is_simulator", lambda: False)
    with pytest.raises(TypeError, match="host"):
        counting.simulated_traffic(read_twice, blocks_for(N), BLOCK_SIZE, (np.ones(N, np.float32), out))


def test_the_other_backend_reports_the_real_error():
    from helpers.counting.other_backend import COMPILER, OtherBackendError, run_under

    with pytest.raises(OtherBackendError, match="ZeroDivisionError|division by zero|KeyError"):
        run_under(COMPILER, "helpers.counting.ptx:compile_request", {"source": "1/0", "name": "k", "argtypes": [],
                                                                     "cc": [9, 0]})
    with pytest.raises(ValueError, match="helpers.module:function"):
        run_under(COMPILER, "os:system", {})
