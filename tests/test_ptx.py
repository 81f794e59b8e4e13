"""The static counter reads PTX: attribution, deduplication, loops, and clear refusals."""

import re
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import helpers  # noqa: F401
from helpers import pipeline
from helpers.counting import LaunchArgs, LinkedCall, OutOfBounds, compare_counts, static_traffic
from helpers.counting.ptx.machine import emulate
from helpers.counting.ptx import (
    CannotAttribute,
    access_bytes,
    analyze_ptx,
    compile_ptx,
    count_global_accesses,
    describe_arg,
)
from corpus_support import shapes
from engine_support import emulate_threads


@cuda.jit
def pick_one(a, b, first, out):
    i = cuda.grid(1)
    if i < out.size:
        src = a if first else b
        out[i] = src[i]


def arrays(k=3, n=64):
    return [cuda.to_device(np.ones(n, np.float32)) for _ in range(k)]


def test_fused_kernel_compiles_to_three_loads_and_one_store():
    a, b, c = arrays()
    counts = count_global_accesses(pipeline.fused_kernel, (a, b, c, np.float32(2), c))
    assert (counts.loads(), counts.stores()) == (3, 1)
    assert [counts.loads(i) for i in range(5)] == [1, 1, 1, 0, 0] and counts.stores(4) == 1
    assert counts.bytes("load", 0) == 4 and not any(a.in_loop for a in counts.accesses) and not counts.unattributed


def test_float64_accesses_are_eight_bytes():
    a = cuda.to_device(np.ones(8))
    counts = count_global_accesses(pipeline.add_kernel, (a, a, a))
    assert counts.bytes("load", 0) == 8 and counts.bytes("store", 2) == 8


def test_an_address_from_two_arrays_cannot_be_attributed():
    a, b, out = arrays()
    counts = count_global_accesses(pick_one, (a, b, True, out))
    assert counts.unattributed and "several arrays" in counts.reasons()[0]


def test_a_loop_that_is_not_grid_stride_cannot_be_attributed():
    a, out = arrays(2)
    counts = count_global_accesses(shapes.repeat_scalar_times, (a, 3, out))
    assert counts.unattributed and "not a grid-stride loop" in " ".join(counts.reasons())


def test_vector_access_widths():
    assert access_bytes("ld.global.v4.f32") == 16
    assert access_bytes("st.global.u8") == 1
    assert access_bytes("ld.global.nc.v2.f64") == 16


def test_mismatched_argument_types_are_refused():
    a, b, c = arrays()
    argtypes = [describe_arg(x) for x in (a, b, c)]
    ptx = compile_ptx(pipeline.add_kernel, argtypes)
    with pytest.raises(CannotAttribute, match="parameters"):
        analyze_ptx(ptx, argtypes[:2])


def test_unsupported_argument_type_is_refused():
    with pytest.raises(CannotAttribute, match="type"):
        describe_arg("a string")


# --- the emulator's edges: one element past the end, a reload of a stored element, blocks that differ ----

N = 300


@cuda.jit
def copy_one_too_far(x, out):
    i = cuda.grid(1)
    if i <= x.size:  # `<=`: thread N reads x[N], one element past the end
        out[i] = x[i]


@cuda.jit
def fill_one_too_far(out):
    i = cuda.grid(1)
    if i <= out.size:  # thread N writes out[N]
        out[i] = 1.0


@pytest.mark.parametrize("kernel, sizes, element", [
    (copy_one_too_far, {"x": N, "out": N + 100}, "x[300]"),  # out is long enough: only x is overrun
    (fill_one_too_far, {"out": N}, "out[300]"),
])
def test_one_element_past_the_end_is_refused_by_both_ways_of_following_the_ptx(kernel, sizes, element):
    args, names = [cuda.to_device(np.ones(n, np.float32)) for n in sizes.values()], list(sizes)
    with pytest.raises(OutOfBounds, match=rf"{re.escape(element)}, outside the array \(size {N}\); 1 thread"):
        static_traffic(kernel, 2, 256, args, names)
    launch = LaunchArgs.of(args, names)
    ptx = compile_ptx(kernel, launch.argtypes, (9, 0))
    with pytest.raises(OutOfBounds, match=rf"{re.escape(element)}, outside the array \(size {N}\); 1 thread"):
        emulate_threads(ptx, launch, (2,), (256,), kernel.__name__)


@cuda.jit
def store_then_reload(x, out, other):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]
        other[i] = 2.0  # other may be out itself, so the compiler loads out[i] again below
        other[i] = out[i] * 3.0


def test_a_reload_of_an_element_the_thread_stored_is_not_a_load():
    x, out, other = arrays(3, N)
    counts = count_global_accesses(store_then_reload, (x, out, other))
    assert [a.op for a in counts.instructions if a.arg_index == 1] == ["store", "load"]  # the compiler reloads out[i]
    result = compare_counts(store_then_reload, 2, 256, (x, out, other), ["x", "out", "other"])
    assert result.static.per_array() == result.simulated.per_array()
    assert result.static.per_array()["out"] == (0, 4 * N)


@cuda.jit
def plus_first_of_block(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + x[cuda.blockIdx.x]  # two loads of x: one moves 256 elements a block, the other 1


def test_two_accesses_to_one_array_that_move_differently_with_the_block_are_counted_block_by_block():
    """Thread 0 of block 0 reads x[0] twice (one load); no other thread meets its second read.  A block
    range followed as one (its count times the number of blocks) would miss that the two meet only there."""
    n = 4 * 256  # whole blocks: no guard differs between them, so only the meeting splits the range
    x, out = arrays(2, n)
    result = compare_counts(plus_first_of_block, 4, 256, (x, out), ["x", "out"])
    assert result.static.per_array() == result.simulated.per_array()
    assert result.static.read["x"] == 4 * (2 * n - 1)
    launch = LaunchArgs.of([x, out])
    ptx = compile_ptx(plus_first_of_block, launch.argtypes, (9, 0))
    assert emulate(ptx, launch, (4,), (256,), "k") == emulate_threads(ptx, launch, (4,), (256,), "k")


def test_a_call_to_linked_cuda_c_is_refused_with_the_functions_name():
    from helpers.checks import random_inputs
    from helpers.lessons.roofline import evidence, kernels

    ptx = evidence.ptx_evidence("linked_cuda_c").ptx
    a, b, c = (cuda.to_device(h) for h in random_inputs(203, seed=4))
    out = cuda.to_device(np.zeros(203, np.float32))
    args, names = (a, b, c, np.float32(1.7), out), ["a", "b", "c", "s", "out"]
    with pytest.raises(LinkedCall, match=r"linked_cuda_c_kernel: it calls `fused_vec4`, a function compiled from "
                                         r"CUDA C .* cannot see"):
        static_traffic(kernels.linked_cuda_c_kernel, 13, 256, args, names, ptx=ptx)
    launch = LaunchArgs.of(args, names)
    with pytest.raises(LinkedCall, match="`fused_vec4`"):
        emulate_threads(ptx, launch, (13,), (256,), "linked_cuda_c_kernel")


MLIR_PTX = Path(__file__).resolve().parent / "data" / "mlir_ptx"  # written by its make.py


@pytest.mark.parametrize("name, shape, grid, block", [("fused_kernel", (1027,), (5,), (256,)),
                                                      ("grid_stride_kernel", (1027,), (2,), (128,)),
                                                      ("row_copy_kernel", (7, 45), (1, 3), (16, 16))])
def test_numba_cuda_mlir_ptx_is_counted_through_its_memref_arrays(name, shape, grid, block):
    """numba-cuda-mlir passes an array as (allocated, aligned, offset, shape, strides in elements): the same
    kernel counts every element once, as numba-cuda's PTX and the simulator do."""
    count = 2 if name == "row_copy_kernel" else 5
    values = [cuda.to_device(np.ones(shape, np.float32)) for _ in range(count)]
    if count == 5:
        values[3] = np.float32(1.7)
    launch = LaunchArgs.of(values)
    ptx = (MLIR_PTX / f"{name}.ptx").read_text()
    counts = emulate(ptx, launch, grid, block, name)
    n = int(np.prod(shape))
    arrays = [k for k, v in enumerate(values) if not isinstance(v, np.float32)]
    assert [counts.loads.get(k, 0) for k in arrays] == [n] * (len(arrays) - 1) + [0]
    assert [counts.stores.get(k, 0) for k in arrays] == [0] * (len(arrays) - 1) + [n]
    # the static view attributes every array load (numba-cuda-mlir's grid-stride loop also has an atomic on its
    # error flag, for a zero step, which no thread of this launch reaches and the count above leaves out)
    found = analyze_ptx(ptx, launch.argtypes).accesses
    assert sorted({a.arg_index for a in found if a.op == "load" and a.arg_index is not None}) == arrays[:-1]
