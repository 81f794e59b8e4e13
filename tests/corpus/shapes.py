"""Kernel shapes a student could write, for comparing the static (PTX) count with the simulator count.

Each :class:`Shape` is one kernel, how to make its arguments at a size ``n`` and how
to launch it.  ``refuse`` is ``None`` when both counts must agree, or words the
static counter's refusal must contain when it cannot follow the kernel.  ``ncu``
marks the shapes also measured with Nsight Compute on a GPU
(``python -m helpers.lessons.dram corpus``).

This file is loaded by path (tests/test_corpus.py and helpers.lessons.dram.measure), so it
imports nothing from tests/.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numba import cuda, float32

BLOCK = 256
TILE = 16


def side(n: int) -> tuple[int, int]:
    """A 2-D shape of about ``n`` elements, about twice as wide as tall (so a guard matched to the
    wrong dimension shows)."""
    rows = max(int(math.sqrt(n / 2)), 2)
    return rows, n // rows + 1


def blocks(n: int) -> int:
    return (n + BLOCK - 1) // BLOCK


@dataclass
class Shape:
    """One corpus kernel."""

    name: str
    kernel: Any
    make: Callable[[int, np.random.Generator], list[Any]]  # host arrays and NumPy scalars
    launch: Callable[[int], tuple[Any, Any]] = lambda n: (blocks(n), BLOCK)
    refuse: str | None = None  # words the refusal reason must contain; None: the counts must agree
    ncu: bool = False


def f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def zeros(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def two_d_launch(n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    rows, cols = side(n)
    return ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE), (TILE, TILE)


def two_d_transposed_launch(n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    rows, cols = side(n)
    return ((rows + TILE - 1) // TILE, (cols + TILE - 1) // TILE), (TILE, TILE)


def few_threads(n: int) -> tuple[int, int]:
    return 2, 64  # fewer threads than elements: the grid-stride loop goes round


# --- 1-D guards ---------------------------------------------------------------------


@cuda.jit
def copy_guard_size(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


@cuda.jit
def copy_guard_shape(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i]


@cuda.jit
def copy_guard_len(x, out):
    i = cuda.grid(1)
    if i < len(x):
        out[i] = x[i]


@cuda.jit
def copy_guard_scalar(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit
def copy_guard_reversed(x, out):
    i = cuda.grid(1)
    if x.size > i:
        out[i] = x[i]


@cuda.jit
def copy_early_return(x, out):
    i = cuda.grid(1)
    if i >= x.size:
        return
    out[i] = x[i]


@cuda.jit
def copy_manual_index(x, out):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i < out.size:
        out[i] = x[i]


@cuda.jit
def copy_guard_le(x, out):
    i = cuda.grid(1)
    if i <= x.size - 1:
        out[i] = x[i]


@cuda.jit
def copy_guard_constant(x, out):
    i = cuda.grid(1)
    if i < 100:
        out[i] = x[i]


@cuda.jit
def copy_guard_two_sizes(x, out):
    i = cuda.grid(1)
    if i < x.size and i < out.size:
        out[i] = x[i]


@cuda.jit
def first_element(x, out):
    i = cuda.grid(1)
    if i == 0:
        out[i] = x[i]


@cuda.jit
def first_thread_of_each_block(x, out):
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = x[cuda.blockIdx.x * cuda.blockDim.x]


@cuda.jit
def thread_index_guard(x, out):
    t = cuda.threadIdx.x
    if t < x.size:
        out[t] = x[t]


@cuda.jit
def fill_constant(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0


@cuda.jit
def reversed_copy(x, out):
    i = cuda.grid(1)
    n = x.size
    if i < n:
        out[i] = x[n - 1 - i]


@cuda.jit
def half_of_the_array(x, out):
    i = cuda.grid(1)
    if i < x.size // 2:
        out[i] = x[2 * i]


# --- arithmetic, dtypes, several arrays ----------------------------------------------


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def series_fused(a, b, c, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (a[i] + b[i]) * c[i] / s


@cuda.jit
def copy_float64(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * 2.0


@cuda.jit
def add_int32(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def two_outputs(x, plus, times):
    i = cuda.grid(1)
    if i < x.size:
        plus[i] = x[i] + 1
        times[i] = x[i] * 2


@cuda.jit
def in_place_scale(x, k):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= k


@cuda.jit
def in_place_add(x, y):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] + y[i]


@cuda.jit
def read_twice(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * x[i] + x[i]


@cuda.jit
def write_then_update(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]
        out[i] += 1.0


@cuda.jit(device=True)
def squared(v):
    return v * v


@cuda.jit(device=True)
def squared_plus_one(v):
    return squared(v) + 1


@cuda.jit
def with_device_function(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = squared(x[i])


@cuda.jit
def with_nested_device_functions(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = squared_plus_one(x[i])


# --- stencils ---------------------------------------------------------------------


@cuda.jit
def forward_difference(x, out):
    i = cuda.grid(1)
    if i + 1 < x.size:
        out[i] = x[i + 1] - x[i]


@cuda.jit
def three_point_interior(x, out):
    i = cuda.grid(1)
    if i > 0 and i < x.size - 1:
        out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3


@cuda.jit
def three_point_clamped(x, out):
    i = cuda.grid(1)
    n = x.size
    if i < n:
        if i == 0 or i == n - 1:
            out[i] = x[i]
        else:
            out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3


@cuda.jit
def neighbours_unguarded_offset(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + x[i + 1]


@cuda.jit
def five_point_interior(x, out):
    c, r = cuda.grid(2)
    if r > 0 and r < x.shape[0] - 1 and c > 0 and c < x.shape[1] - 1:
        out[r, c] = x[r - 1, c] + x[r + 1, c] + x[r, c - 1] + x[r, c + 1] - 4 * x[r, c]


# --- data-dependent ------------------------------------------------------------------


@cuda.jit
def gather(x, idx, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[idx[i]]


@cuda.jit
def scatter(x, idx, out):
    i = cuda.grid(1)
    if i < x.size:
        out[idx[i]] = x[i]


@cuda.jit
def positive_only(x, out):
    i = cuda.grid(1)
    if i < x.size and x[i] > 0:
        out[i] = x[i]


# --- loops ---------------------------------------------------------------------------


@cuda.jit
def grid_stride_size(x, out):
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[j] = 2 * x[j]


@cuda.jit
def grid_stride_scalar(x, out, n):
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[j] = x[j] + 1


@cuda.jit
def grid_stride_int32(a, b, out):
    for j in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[j] = a[j] * b[j]


@cuda.jit
def grid_stride_half(x, out):
    for j in range(cuda.grid(1), x.size // 2, cuda.gridsize(1)):
        out[j] = x[j]


@cuda.jit
def grid_stride_interior(x, out):
    for j in range(cuda.grid(1) + 1, x.size - 1, cuda.gridsize(1)):
        out[j] = x[j - 1] + x[j + 1]


@cuda.jit
def grid_stride_then_first_thread(x, out, flag):
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[j] = x[j]
    if cuda.grid(1) == 0:
        flag[0] = 1.0


@cuda.jit
def grid_stride_even_only(x, out):
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        if j % 2 == 0:
            out[j] = x[j]


@cuda.jit
def grid_stride_positive_only(x, out):
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        if x[j] > 0:
            out[j] = x[j]


@cuda.jit
def row_sums(x, out):
    r = cuda.grid(1)
    if r < x.shape[0]:
        total = 0.0
        for k in range(x.shape[1]):
            total += x[r, k]
        out[r] = total


@cuda.jit
def repeat_scalar_times(x, m, out):
    i = cuda.grid(1)
    if i < out.size:
        for _ in range(m):
            out[i] += x[i]


# --- shared-memory reductions ---------------------------------------------------------


@cuda.jit
def block_max(x, maxima):
    partial = cuda.shared.array(256, dtype=float32)
    t = cuda.threadIdx.x
    best = -np.inf
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        best = max(best, x[j])
    partial[t] = best
    cuda.syncthreads()
    step = 128
    while step > 0:
        if t < step:
            partial[t] = max(partial[t], partial[t + step])
        cuda.syncthreads()
        step //= 2
    if t == 0:
        maxima[cuda.blockIdx.x] = partial[0]


@cuda.jit
def block_sum_guarded(x, sums):
    partial = cuda.shared.array(256, dtype=float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = 128
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        sums[cuda.blockIdx.x] = partial[0]


@cuda.jit
def block_sum_atomic(x, total):
    partial = cuda.shared.array(256, dtype=float32)
    t = cuda.threadIdx.x
    acc = 0.0
    for j in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[j]
    partial[t] = acc
    cuda.syncthreads()
    step = 128
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        cuda.atomic.add(total, 0, partial[0])


# --- 2-D ---------------------------------------------------------------------------


@cuda.jit
def add_2d(a, b, out):
    c, r = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = a[r, c] + b[r, c]


@cuda.jit
def add_2d_columns_first(a, b, out):
    c, r = cuda.grid(2)
    if c < out.shape[1] and r < out.shape[0]:
        out[r, c] = a[r, c] + b[r, c]


@cuda.jit
def transpose(x, out):
    i, j = cuda.grid(2)
    if i < out.shape[1] and j < out.shape[0]:
        out[j, i] = x[i, j]


@cuda.jit
def scale_2d_flat_guard(x, out):
    c, r = cuda.grid(2)
    k = r * x.shape[1] + c
    if c < x.shape[1] and k < x.size:
        out[r, c] = x[r, c]


@cuda.jit
def first_row_2d(x, out):
    c, r = cuda.grid(2)
    if r == 0 and c < x.shape[1]:
        out[c] = x[0, c]


@cuda.jit
def fraction_of_the_array(x, out, fraction):
    i = cuda.grid(1)
    if i < x.size * fraction:
        out[i] = x[i]


@cuda.jit
def halve_until_small(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        while v > 1:
            v = v / 2
        out[i] = v


@cuda.jit
def clamp_index_from_data(x, out):
    i = cuda.grid(1)
    if i < out.size:
        j = int(x[i] * 10) % out.size
        out[j] = 1.0


@cuda.jit
def every_other_element(x, out):
    i = cuda.grid(1)
    if 2 * i < x.size:
        out[2 * i] = x[2 * i]


@cuda.jit
def last_thread_writes(x, out):
    i = cuda.grid(1)
    if i == x.size - 1:
        out[0] = x[i]


@cuda.jit
def copy_bool_mask(mask, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0 if mask[i] else 0.0


@cuda.jit
def two_d_row_guard_then_loop(x, out):
    r = cuda.grid(1)
    if r < x.shape[0]:
        for c in range(1, x.shape[1] - 1):
            out[r, c] = x[r, c - 1] + x[r, c + 1]


def _one(rng, n, dtype=np.float32):
    return [f32(rng, n).astype(dtype), zeros(n, dtype=dtype)]


def _matrix(rng, n):
    rows, cols = side(n)
    return [f32(rng, rows, cols), zeros(rows, cols)]


SHAPES: list[Shape] = [
    Shape("copy_guard_size", copy_guard_size, lambda n, r: _one(r, n), ncu=True),
    Shape("copy_guard_shape", copy_guard_shape, lambda n, r: _one(r, n)),
    Shape("copy_guard_len", copy_guard_len, lambda n, r: _one(r, n)),
    Shape("copy_guard_scalar", copy_guard_scalar, lambda n, r: _one(r, n) + [np.int64(n)], ncu=True),
    Shape("copy_guard_scalar_shorter", copy_guard_scalar, lambda n, r: _one(r, n) + [np.int64(n - 7)]),
    Shape("copy_guard_scalar_int32", copy_guard_scalar, lambda n, r: _one(r, n) + [np.int32(n - 3)]),
    Shape("copy_guard_reversed", copy_guard_reversed, lambda n, r: _one(r, n)),
    Shape("copy_early_return", copy_early_return, lambda n, r: _one(r, n)),
    Shape("copy_manual_index", copy_manual_index, lambda n, r: _one(r, n)),
    Shape("copy_guard_le", copy_guard_le, lambda n, r: _one(r, n)),
    Shape("copy_guard_constant", copy_guard_constant, lambda n, r: _one(r, n)),
    Shape("copy_guard_two_sizes", copy_guard_two_sizes, lambda n, r: [f32(r, n), zeros(n - 10)]),
    Shape("first_element", first_element, lambda n, r: _one(r, n)),
    Shape("first_thread_of_each_block", first_thread_of_each_block, lambda n, r: [f32(r, n), zeros(blocks(n))]),
    Shape("thread_index_guard", thread_index_guard, lambda n, r: _one(r, n)),
    Shape("fill_constant", fill_constant, lambda n, r: [zeros(n)]),
    Shape("reversed_copy", reversed_copy, lambda n, r: _one(r, n)),
    Shape("half_of_the_array", half_of_the_array, lambda n, r: _one(r, n)),
    Shape("saxpy", saxpy, lambda n, r: [np.float32(2.5), f32(r, n), f32(r, n), zeros(n)], ncu=True),
    Shape("series_fused", series_fused, lambda n, r: [f32(r, n), f32(r, n), f32(r, n), np.float32(2.0), zeros(n)]),
    Shape("copy_float64", copy_float64, lambda n, r: _one(r, n, np.float64), ncu=True),
    Shape("add_int32", add_int32, lambda n, r: [np.arange(n, dtype=np.int32), np.ones(n, np.int32), zeros(n, dtype=np.int32)]),
    Shape("two_outputs", two_outputs, lambda n, r: [f32(r, n), zeros(n), zeros(n)]),
    Shape("in_place_scale", in_place_scale, lambda n, r: [f32(r, n), np.float32(3.0)]),
    Shape("in_place_add", in_place_add, lambda n, r: [f32(r, n), f32(r, n)]),
    Shape("read_twice", read_twice, lambda n, r: _one(r, n)),
    Shape("write_then_update", write_then_update, lambda n, r: _one(r, n)),
    Shape("with_device_function", with_device_function, lambda n, r: _one(r, n)),
    Shape("with_nested_device_functions", with_nested_device_functions, lambda n, r: _one(r, n)),
    Shape("forward_difference", forward_difference, lambda n, r: _one(r, n)),
    Shape("three_point_interior", three_point_interior, lambda n, r: _one(r, n), ncu=True),
    Shape("three_point_clamped", three_point_clamped, lambda n, r: _one(r, n)),
    Shape("neighbours_unguarded_offset", neighbours_unguarded_offset, lambda n, r: [f32(r, n + 1), zeros(n)]),
    Shape("five_point_interior", five_point_interior, lambda n, r: _matrix(r, n), two_d_launch, ncu=True),
    Shape("gather", gather, lambda n, r: [f32(r, n), r.integers(0, n, n).astype(np.int64), zeros(n)],
          refuse="loaded from memory"),
    Shape("scatter", scatter, lambda n, r: [f32(r, n), r.permutation(n).astype(np.int64), zeros(n)],
          refuse="loaded from memory"),
    Shape("positive_only", positive_only, lambda n, r: _one(r, n), refuse="loaded from memory"),
    Shape("grid_stride_size", grid_stride_size, lambda n, r: _one(r, n), few_threads),
    Shape("grid_stride_size_many_threads", grid_stride_size, lambda n, r: _one(r, n), lambda n: (3, 128)),
    Shape("grid_stride_scalar", grid_stride_scalar, lambda n, r: _one(r, n) + [np.int64(n - 5)], few_threads),
    Shape("grid_stride_int32", grid_stride_int32,
          lambda n, r: [np.arange(n, dtype=np.int32), np.full(n, 3, np.int32), zeros(n, dtype=np.int32)], few_threads),
    Shape("grid_stride_half", grid_stride_half, lambda n, r: _one(r, n), few_threads),
    Shape("grid_stride_interior", grid_stride_interior, lambda n, r: _one(r, n), few_threads),
    Shape("grid_stride_then_first_thread", grid_stride_then_first_thread,
          lambda n, r: _one(r, n) + [zeros(1)], few_threads),
    Shape("grid_stride_even_only", grid_stride_even_only, lambda n, r: _one(r, n), few_threads),
    Shape("grid_stride_positive_only", grid_stride_positive_only, lambda n, r: _one(r, n), few_threads,
          refuse="loaded from memory"),
    Shape("row_sums", row_sums, lambda n, r: [f32(r, *side(n)), zeros(side(n)[0])]),
    Shape("repeat_scalar_times", repeat_scalar_times, lambda n, r: _one(r, n)[:1] + [np.int64(3), zeros(n)],
          ),
    Shape("block_max", block_max, lambda n, r: [f32(r, n), zeros(blocks(n))], ncu=True),
    Shape("block_max_one_block", block_max, lambda n, r: [f32(r, n), zeros(1)], lambda n: (1, BLOCK)),
    Shape("block_sum_guarded", block_sum_guarded, lambda n, r: [f32(r, n), zeros(blocks(n))]),
    Shape("block_sum_atomic", block_sum_atomic, lambda n, r: [f32(r, n), zeros(1)]),
    Shape("add_2d", add_2d, lambda n, r: [f32(r, *side(n)), f32(r, *side(n)), zeros(*side(n))], two_d_launch),
    Shape("add_2d_columns_first", add_2d_columns_first,
          lambda n, r: [f32(r, *side(n)), f32(r, *side(n)), zeros(*side(n))], two_d_launch),
    Shape("transpose", transpose, lambda n, r: [f32(r, *side(n)), zeros(*reversed(side(n)))],
          two_d_transposed_launch, ncu=True),
    Shape("scale_2d_flat_guard", scale_2d_flat_guard, lambda n, r: _matrix(r, n), two_d_launch),
    Shape("fraction_of_the_array", fraction_of_the_array, lambda n, r: _one(r, n) + [np.float32(0.5)],
          refuse="floating-point argument `arg2`"),
    Shape("halve_until_small", halve_until_small, lambda n, r: [f32(r, n) * 8, zeros(n)], refuse="loaded from memory"),
    Shape("clamp_index_from_data", clamp_index_from_data, lambda n, r: _one(r, n), refuse="loaded from memory"),
    Shape("every_other_element", every_other_element, lambda n, r: _one(r, n)),
    Shape("last_thread_writes", last_thread_writes, lambda n, r: [f32(r, n), zeros(1)]),
    Shape("copy_bool_mask", copy_bool_mask, lambda n, r: [r.random(n) > 0.5, zeros(n)]),
    Shape("two_d_row_guard_then_loop", two_d_row_guard_then_loop, lambda n, r: _matrix(r, n)),
    Shape("first_row_2d", first_row_2d, lambda n, r: [f32(r, *side(n)), zeros(side(n)[1])], two_d_launch),
]


def by_name() -> dict[str, Shape]:
    return {s.name: s for s in SHAPES}
