"""The static counter reads PTX: attribution, deduplication, loops, and clear refusals."""

import numpy as np
import pytest
from numba import cuda

import helpers  # noqa: F401
from helpers import pipeline
from helpers.counting.ptx import (
    CannotAttribute,
    access_bytes,
    analyze_ptx,
    compile_ptx,
    count_global_accesses,
    describe_arg,
)


@cuda.jit
def pick_one(a, b, first, out):
    i = cuda.grid(1)
    if i < out.size:
        src = a if first else b
        out[i] = src[i]


@cuda.jit
def repeat_m_times(a, m, out):
    i = cuda.grid(1)
    if i < out.size:
        for _ in range(m):
            out[i] += a[i]


def arrays(k=3, n=64):
    return [cuda.to_device(np.ones(n, np.float32)) for _ in range(k)]


def test_fused_kernel_compiles_to_three_loads_and_one_store():
    a, b, c = arrays()
    counts = count_global_accesses(pipeline.fused_kernel, (a, b, c, np.float32(2), c))
    assert (counts.loads(), counts.stores()) == (3, 1)
    assert [counts.loads(i) for i in range(5)] == [1, 1, 1, 0, 0] and counts.stores(4) == 1
    assert counts.bytes("load", 0) == 4 and not counts.has_loop and not counts.unattributed


def test_float64_accesses_are_eight_bytes():
    a = cuda.to_device(np.ones(8))
    counts = count_global_accesses(pipeline.add_kernel, (a, a, a))
    assert counts.bytes("load", 0) == 8 and counts.bytes("store", 2) == 8


def test_an_address_from_two_arrays_cannot_be_attributed():
    a, b, out = arrays()
    counts = count_global_accesses(pick_one, (a, b, True, out))
    assert counts.unattributed and "several arrays" in counts.reasons()[0]
    with pytest.raises(CannotAttribute, match="several arrays"):
        counts.require_attributed("pick_one")


def test_a_loop_that_is_not_grid_stride_cannot_be_attributed():
    a, out = arrays(2)
    counts = count_global_accesses(repeat_m_times, (a, 3, out))
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
