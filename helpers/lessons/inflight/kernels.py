"""The kernels of lesson 10: probes that stream with a chosen number of bytes in flight, the
pointer chase, dependent-operation chains, a copy, and 16-byte versions of the three kernels.

* :func:`probe_kernel`: a grid-stride kernel that streams ``reads`` arrays into one output,
  ``unroll`` independent element groups per thread in flight, with 4- or 16-byte accesses
  (its source is generated, :func:`probe_source`, and compiled on demand);
* :data:`chase_kernel`: one thread following pointers through a random cycle of cache
  lines (:func:`chase_buffer`): each load needs the one before it;
* :data:`CHAINS`: one thread applying a float32 add, multiply or divide to its own result;
* :func:`kernel_launchers`: every kernel the model predicts (:data:`~helpers.lessons.inflight.model.SHAPES`),
  with its arguments, a launch and the answer it must give.

Notebook 10's cells are the source of the kernels it shows, copied here between the
export markers by ``scripts/export_kernels.py``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from llvmlite import ir
from numba import cuda
from numba.core import types
from numba.cuda.extending import intrinsic

from helpers.backend import is_simulator
from helpers.lessons.inflight.model import READS, WIDTHS
from helpers.lessons.roofline.kernels import VARIANT_INFO, load4, require_aligned, store4
from helpers.pipeline import add_kernel, multiply_kernel, reference, scale_kernel
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.validate import check_elementwise

LINE_BYTES = 128
"""One L1 cache line: the pointer chase steps at least this far, so no two loads share a line."""
PAGE_BYTES = 2 * 1024 * 1024
"""The GPU's large page: a chase kept inside one page at a time avoids TLB misses."""


def probe_source(reads: int, width: int, unroll: int) -> str:
    """Source of a grid-stride probe: ``reads`` arrays summed into ``out``, ``unroll`` groups per thread in flight."""
    names = "xyz"[:reads]
    lines = ["def probe(x, y, z, out, groups):",
             "    j = cuda.grid(1)",
             "    stride = cuda.gridsize(1)",
             f"    while j + {unroll - 1} * stride < groups:"]

    def load(arr: str, u: int) -> list[str]:
        at = f"j + {u} * stride" if u else "j"
        if width == 16:
            return [f"        {arr}{u}_0, {arr}{u}_1, {arr}{u}_2, {arr}{u}_3 = load4({arr}, {at})"]
        return [f"        {arr}{u}_0 = {arr}[{at}]"]

    parts = range(4) if width == 16 else range(1)
    for arr in names:  # every load of the trip is issued before any store
        for u in range(unroll):
            lines += load(arr, u)
    for u in range(unroll):
        at = f"j + {u} * stride" if u else "j"
        sums = [" + ".join(f"{arr}{u}_{p}" for arr in names) for p in parts]
        if width == 16:
            lines.append(f"        store4(out, {at}, {', '.join(sums)})")
        else:
            lines.append(f"        out[{at}] = {sums[0]}")
    lines.append(f"        j += {unroll} * stride")
    lines.append("    while j < groups:")
    for arr in names:
        lines += [s.replace("0_", "t_") for s in load(arr, 0)]
    sums = [" + ".join(f"{arr}t_{p}" for arr in names) for p in parts]
    lines.append(f"        store4(out, j, {', '.join(sums)})" if width == 16 else f"        out[j] = {sums[0]}")
    lines.append("        j += stride")
    return "\n".join(lines) + "\n"


_PROBES: dict[tuple[int, int, int], Any] = {}


def probe_kernel(reads: int, width: int, unroll: int) -> Any:
    """The compiled-on-demand probe kernel ``(x, y, z, out, groups)`` for one configuration."""
    if reads not in READS or width not in WIDTHS or unroll < 1:
        raise ValueError(f"no probe for reads={reads}, width={width}, unroll={unroll}: reads in {READS}, "
                         f"width in {WIDTHS}, unroll >= 1")
    key = (reads, width, unroll)
    if key not in _PROBES:
        scope: dict[str, Any] = {"cuda": cuda, "load4": load4, "store4": store4}
        exec(compile(probe_source(reads, width, unroll), f"<probe r{reads} w{width} u{unroll}>", "exec"), scope)
        _PROBES[key] = cuda.jit(scope["probe"])
    return _PROBES[key]


def probe_expected(x: np.ndarray, y: np.ndarray, z: np.ndarray, reads: int) -> np.ndarray:
    """What a probe writes: the sum of its ``reads`` inputs, in the kernel's order."""
    return [x, x + y, x + y + z][reads - 1]


def run_probe(reads: int, width: int, unroll: int, grid: int, x: Any, y: Any, z: Any, out: Any,
              block: int = BLOCK_SIZE) -> None:
    """Launch one probe over ``out`` (its length must be a multiple of ``width // 4``)."""
    per = width // 4
    if out.size % per:
        raise ValueError(f"a {width}-byte probe needs a length that is a multiple of {per}, got {out.size}")
    probe_kernel(reads, width, unroll)[grid, block](x, y, z, out, out.size // per)


# >>> exported from notebooks/10_bytes_in_flight.ipynb (the cell defining chase_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def chase_kernel(next_index, start, steps, out):
    j = start
    for _ in range(steps):
        j = next_index[j]  # each load needs the one before it: nothing overlaps
    out[0] = j
# <<< end of the export from notebooks/10_bytes_in_flight.ipynb


def chase_order(lines: int, lines_per_page: int, order: str, rng: np.random.Generator) -> np.ndarray:
    """The order the chase visits ``lines`` cache lines: all shuffled, or shuffled within each page."""
    if order == "random":
        return rng.permutation(lines)
    if order == "page_local":
        pages = -(-lines // lines_per_page)
        parts = [p * lines_per_page + rng.permutation(min(lines_per_page, lines - p * lines_per_page))
                 for p in range(pages)]
        return np.concatenate(parts)
    raise ValueError(f"order must be 'random' or 'page_local', got {order!r}")


def chase_buffer(footprint_bytes: int, stride_bytes: int, order: str, seed: int = 0) -> tuple[np.ndarray, int]:
    """An int32 buffer of ``footprint_bytes`` holding one cycle through its lines, and the cycle's start."""
    if stride_bytes < 4 or stride_bytes % 4 or footprint_bytes < 2 * stride_bytes:
        raise ValueError("stride_bytes must be a positive multiple of 4 and the footprint at least two strides")
    per = stride_bytes // 4
    lines = footprint_bytes // stride_bytes
    visit = chase_order(lines, max(1, PAGE_BYTES // stride_bytes), order, np.random.default_rng(seed))
    positions = (visit * per).astype(np.int64)
    buffer = np.zeros(lines * per, dtype=np.int32)
    buffer[positions] = np.roll(positions, -1)
    return buffer, int(positions[0])


def chase_reference(buffer: np.ndarray, start: int, steps: int) -> int:
    """Where ``steps`` dependent loads from ``start`` end, computed on the host."""
    j = start
    for _ in range(steps):
        j = int(buffer[j])
    return j


# >>> exported from notebooks/10_bytes_in_flight.ipynb (the cell defining add_chain);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def add_chain(x, s, steps, out):
    y = x[0]
    for _ in range(steps):  # eight dependent additions per step: each needs the one before it
        y = y + s
        y = y + s
        y = y + s
        y = y + s
        y = y + s
        y = y + s
        y = y + s
        y = y + s
    out[0] = y


@cuda.jit
def mul_chain(x, s, steps, out):
    y = x[0]
    for _ in range(steps):
        y = y * s
        y = y * s
        y = y * s
        y = y * s
        y = y * s
        y = y * s
        y = y * s
        y = y * s
    out[0] = y


@cuda.jit
def div_chain(x, s, steps, out):
    y = x[0]
    for _ in range(steps):
        y = y / s
        y = y / s
        y = y / s
        y = y / s
        y = y / s
        y = y / s
        y = y / s
        y = y / s
    out[0] = y
# <<< end of the export from notebooks/10_bytes_in_flight.ipynb


CHAINS: dict[str, tuple[Any, float]] = {"add": (add_chain, 1e-3), "mul": (mul_chain, 1.0001), "div": (div_chain, 1.0001)}
"""Each operation's chain kernel and the operand it applies (values stay normal floats over the chain)."""
OPS_PER_STEP = 8


def chain_reference(op: str, start: float, s: float, steps: int) -> np.float32:
    """What a chain ends at, computed on the host one float32 operation at a time."""
    y, s32 = np.float32(start), np.float32(s)
    apply = {"add": np.add, "mul": np.multiply, "div": np.divide}[op]
    for _ in range(steps * OPS_PER_STEP):
        y = apply(y, s32, dtype=np.float32)
    return y


# >>> exported from notebooks/10_bytes_in_flight.ipynb (the cell defining copy_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def copy_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cuda.jit
def scale_by_reciprocal_kernel(x, r, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * r  # scale_kernel's traffic, with a multiply where it divides
# <<< end of the export from notebooks/10_bytes_in_flight.ipynb


def _vector_tail(n: int) -> int:
    return blocks_for(max(n // 4, 3))


# >>> exported from notebooks/10_bytes_in_flight.ipynb (the cell defining add_vec4_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def add_vec4_kernel(x, y, out):
    j = cuda.grid(1)
    if j < out.size // 4:
        x0, x1, x2, x3 = load4(x, j)
        y0, y1, y2, y3 = load4(y, j)
        store4(out, j, x0 + y0, x1 + y1, x2 + y2, x3 + y3)
    i = 4 * (out.size // 4) + j  # the last n % 4 elements, one scalar each
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def multiply_vec4_kernel(x, y, out):
    j = cuda.grid(1)
    if j < out.size // 4:
        x0, x1, x2, x3 = load4(x, j)
        y0, y1, y2, y3 = load4(y, j)
        store4(out, j, x0 * y0, x1 * y1, x2 * y2, x3 * y3)
    i = 4 * (out.size // 4) + j
    if i < out.size:
        out[i] = x[i] * y[i]


@cuda.jit
def scale_vec4_kernel(x, s, out):
    j = cuda.grid(1)
    if j < out.size // 4:
        x0, x1, x2, x3 = load4(x, j)
        store4(out, j, x0 / s, x1 / s, x2 / s, x3 / s)
    i = 4 * (out.size // 4) + j
    if i < out.size:
        out[i] = x[i] / s
# <<< end of the export from notebooks/10_bytes_in_flight.ipynb


def run_three_vec4(a: Any, b: Any, c: Any, s: float, t1: Any, t2: Any, out: Any) -> None:
    """The three kernels with 16-byte loads and stores: one float4 per thread, full grid."""
    n = check_elementwise({"a": a, "b": b, "c": c, "t1": t1, "t2": t2, "out": out})
    require_aligned({"a": a, "b": b, "c": c, "t1": t1, "t2": t2, "out": out})
    grid, s = _vector_tail(n), a.dtype.type(s)
    add_vec4_kernel[grid, BLOCK_SIZE](a, b, t1)
    multiply_vec4_kernel[grid, BLOCK_SIZE](t1, c, t2)
    scale_vec4_kernel[grid, BLOCK_SIZE](t2, s, out)



def sm_id_kernel() -> Any:
    """A kernel ``where(out, spin)`` whose every block writes the id of the SM it ran on to ``out[block]`` (GPU only)."""

    @intrinsic
    def smid(typingctx: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            asm = ir.InlineAsm(ir.FunctionType(ir.IntType(32), []), "mov.u32 $0, %smid;", "=r", side_effect=True)
            return builder.call(asm, [])

        return types.int32(), codegen

    @cuda.jit
    def where(out, spin):
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = smid()
        for _ in range(spin):  # stay resident a while, so all blocks of the launch sit on the SMs together
            cuda.nanosleep(1000)

    return where



Launcher = tuple[Any, tuple[Any, ...], Callable[[], None], np.ndarray]


def kernel_launchers(a: Any, b: Any, c: Any, s: float, t: Any, out: Any) -> dict[str, Launcher]:
    """name -> (kernel, its arguments, a launch, the expected output) for every kernel in :data:`SHAPES`."""
    n = out.size
    s32 = a.dtype.type(s)
    r = np.float32(1) / s32
    grid, vgrid = blocks_for(n), _vector_tail(n)
    ha, hb, hc = a.copy_to_host(), b.copy_to_host(), c.copy_to_host()
    plain = {"add": (add_kernel, grid, (a, b, out), ha + hb), "multiply": (multiply_kernel, grid, (a, b, out), ha * hb),
             "scale": (scale_kernel, grid, (a, s32, out), ha / s32), "copy": (copy_kernel, grid, (a, out), ha),
             "scale_by_reciprocal": (scale_by_reciprocal_kernel, grid, (a, r, out), ha * r),
             "add_vec4": (add_vec4_kernel, vgrid, (a, b, out), ha + hb),
             "multiply_vec4": (multiply_vec4_kernel, vgrid, (a, b, out), ha * hb),
             "scale_vec4": (scale_vec4_kernel, vgrid, (a, s32, out), ha / s32)}
    table: dict[str, Launcher] = {
        name: (kernel, args, (lambda k=kernel, g=g, args=args: k[g, BLOCK_SIZE](*args)), want)
        for name, (kernel, g, args, want) in plain.items()}
    want_fused = reference(ha, hb, hc, s)
    for name, v in VARIANT_INFO.items():
        if v.gpu_only and is_simulator():
            continue
        table[name] = (v.kernel, (a, b, c, s32, out), (lambda launch=v.launch: launch(a, b, c, s, out)), want_fused)
    return table
