"""The static (PTX) count against the simulator count, on a corpus of kernels a student could write.

For every shape in tests/corpus/shapes.py: either both counts agree exactly, array by
array, or the static counter refuses with a reason that names what it cannot follow.
A few checks of the block-range shortcut (against following every thread) and of
launches far too large for the simulator close the file.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from numba import cuda

import helpers  # noqa: F401
from helpers.counting import ArgInfo, CannotAttribute, LaunchArgs, compare_counts, static_traffic
from helpers.counting.ptx.machine import emulate
from helpers.counting.ptx import compile_ptx
from helpers.counting.record import OutOfBounds
from corpus_support import shapes
from engine_support import emulate_threads

N = 300  # two blocks of 256, the second partly guarded
SHAPES = shapes.SHAPES


def _args(shape, n=N):
    rng = np.random.default_rng(0)
    return [cuda.to_device(v) if isinstance(v, np.ndarray) else v for v in shape.make(n, rng)]


def test_the_corpus_is_large_and_varied():
    assert len(SHAPES) >= 40
    assert len({s.name for s in SHAPES}) == len(SHAPES)
    refused = [s for s in SHAPES if s.refuse]
    assert 3 <= len(refused) < len(SHAPES) // 2
    assert sum(s.ncu for s in SHAPES) >= 6


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_static_count_is_right_or_refuses_with_the_reason(shape):
    grid, block = shape.launch(N)
    result = compare_counts(shape.kernel, grid, block, _args(shape))
    if shape.refuse is None:
        assert result.cannot_attribute is None, result.cannot_attribute
        assert result.static.per_array() == result.simulated.per_array()
        assert result.simulated.bytes_read + result.simulated.bytes_written > 0
    else:
        assert result.static is None, f"expected a refusal naming {shape.refuse!r}, got {result.static}"
        assert shape.refuse in result.cannot_attribute, result.cannot_attribute


@pytest.mark.parametrize("shape", [s for s in SHAPES if s.refuse is None][::3],
                         ids=[s.name for s in SHAPES if s.refuse is None][::3])
def test_block_ranges_count_what_following_every_thread_counts(shape):
    grid, block = shape.launch(N)
    launch = LaunchArgs.of(_args(shape))
    ptx = compile_ptx(shape.kernel, launch.argtypes, (9, 0))
    g, b = (grid if isinstance(grid, tuple) else (grid,)), (block if isinstance(block, tuple) else (block,))
    assert emulate(ptx, launch, g, b, shape.name) == emulate_threads(ptx, launch, g, b, shape.name)


def _array(name, shape, dtype="float32", itemsize=4):
    strides, step = [], itemsize
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return ArgInfo(name, True, dtype, tuple(shape), itemsize, tuple(reversed(strides)))


@pytest.mark.parametrize("log2_n", [20, 26])
def test_large_launches_are_counted_without_running_them(log2_n):
    n = 2**log2_n + 3  # a partly guarded last block
    blocks = (n + 255) // 256
    reduce = static_traffic(shapes.block_max, blocks, 256, LaunchArgs((_array("x", (n,)), _array("maxima", (blocks,)))))
    assert reduce.per_array() == {"x": (4 * n, 0), "maxima": (0, 4 * blocks)}
    interior = static_traffic(shapes.three_point_interior, blocks, 256, LaunchArgs((_array("x", (n,)), _array("out", (n,)))))
    assert interior.per_array() == {"x": (4 * 3 * (n - 2), 0), "out": (0, 4 * (n - 2))}


def test_notebook_06_block_max_writes_one_value_per_block():
    x = cuda.to_device(np.random.default_rng(1).random(N).astype(np.float32))
    maxima = cuda.device_array(2, np.float32)
    t = static_traffic(shapes.block_max, 2, 256, (x, maxima), ["x", "maxima"])
    assert t.per_array() == {"x": (4 * N, 0), "maxima": (0, 8)}


def test_a_missing_guard_is_named_by_both_counts():
    shape = shapes.by_name()["copy_guard_size"]
    x, out = cuda.to_device(np.ones(N, np.float32)), cuda.to_device(np.zeros(N - 44, np.float32))
    with pytest.raises(OutOfBounds, match=r"outside the array \(size 256\)"):
        static_traffic(shape.kernel, 2, 256, (x, out), ["x", "out"])
    with pytest.raises(IndexError):
        compare_counts(shape.kernel, 2, 256, (x, out), ["x", "out"])


def test_mismatched_lengths_count_each_array_by_its_own_elements():
    shape = shapes.by_name()["series_fused"]
    a = cuda.to_device(np.ones(3 * N, np.float32))  # three times longer than the others
    b, c, out = (cuda.to_device(np.ones(N, np.float32)) for _ in range(3))
    result = compare_counts(shape.kernel, 2, 256, (a, b, c, np.float32(2), out), ["a", "b", "c", "s", "out"])
    assert result.static.per_array() == result.simulated.per_array()
    assert result.static.read["a"] == 4 * N  # not 3 * 4 * N


def test_a_device_function_compiles_and_a_failure_says_why():
    shape = shapes.by_name()["with_nested_device_functions"]
    t = static_traffic(shape.kernel, 2, 256, _args(shape), ["x", "out"])
    assert t.per_array() == {"x": (4 * N, 0), "out": (0, 4 * N)}

    @cuda.jit
    def uses_an_unknown_name(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + undefined_helper(x[i])  # noqa: F821

    with pytest.raises(CannotAttribute, match="NameError|undefined_helper"):
        static_traffic(uses_an_unknown_name, 2, 256, _args(shape), ["x", "out"])


@pytest.mark.parametrize("name", ["first_element", "grid_stride_scalar"])
def test_a_64_bit_bitwise_comparison_counts_as_its_signed_twin(name):
    """The GPU's own compile (``inspect_asm``) can compare 64-bit values as ``.b64``; the masks that
    narrow a comparison must not overflow on them (an H200 run raised OverflowError here)."""
    shape = shapes.by_name()[name]
    grid, block = shape.launch(N)
    launch = LaunchArgs.of(_args(shape))
    ptx = compile_ptx(shape.kernel, launch.argtypes, (9, 0))
    bitwise = re.sub(r"setp\.(eq|ne)\.s64", r"setp.\1.b64", ptx)
    assert bitwise != ptx
    g, b = (grid if isinstance(grid, tuple) else (grid,)), (block if isinstance(block, tuple) else (block,))
    assert emulate(bitwise, launch, g, b, name) == emulate(ptx, launch, g, b, name)
