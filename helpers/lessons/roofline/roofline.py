"""The fused kernel, step by step toward the memory roofline (notebook 07).

Every variant computes ``out = (a + b) * c / s`` with the same IEEE operations in
the same order, so each result is bitwise equal to :func:`helpers.pipeline.reference`.
They differ only in how the work is laid out over threads and how wide each memory
access is:

========================  ==========================================================
``naive``                 notebook 03's kernel: one element per thread, full grid
``grid_stride``           a grid-stride loop over a grid sized from the device
``ilp4``                  four independent elements per thread per loop trip
``streaming``             ``cuda.ldcs``/``cuda.stcs``: evict-first cache hints
``vec4``                  16-byte loads and stores from an ``@intrinsic`` (pure Numba)
``vec4_resident``         the same kernel on a grid sized from the device
``vec4_streaming``        16-byte loads and stores with the ``.cs`` hint (inline PTX)
``linked_cuda_c``         a CUDA C ``float4`` device function linked with ``link=``
========================  ==========================================================

Each launcher takes device arrays ``(a, b, c, s, out)``; :data:`VARIANTS` maps names
to launchers and :data:`VARIANT_INFO` to a description.  The 16-byte variants need
16-byte-aligned arrays (a sliced view may not be): their launchers raise
:class:`MisalignedArray`, and :func:`best_fused` falls back to a scalar kernel.

In the CUDA simulator the ``@intrinsic`` loads and the cache hints do not exist, so
Python stand-ins with the same indexing run instead: the simulator checks each
kernel's *logic* (bounds, tail, results), while :func:`ptx_evidence` compiles the
real kernels to PTX -- in a subprocess on the real compiler -- for the *instructions*.
The linked CUDA C variant runs on a GPU only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import poison, random_inputs
from helpers.counting.other_backend import COMPILER, OtherBackendError, run_under
from helpers.counting.ptx import access_bytes, cache_dir
from helpers.device import banner, sm_count
from helpers.pipeline import fused_kernel, reference
from helpers.results import Claim, Record, ResultError, load, save
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import copy_bandwidth, time_gpu
from helpers.validate import check_elementwise

CUDA_C_SOURCE = Path(__file__).resolve().parent / "fused_vec4.cu"
VECTOR_BYTES = 16
"""One ``float4``: the widest load a thread can issue in one instruction."""


class MisalignedArray(ValueError):
    """A 16-byte vector kernel was given an array whose data is not 16-byte aligned."""


class GpuOnly(RuntimeError):
    """The variant needs a real GPU (it links CUDA C, which the simulator cannot run)."""


# --- the access primitives: real instructions on a GPU, Python stand-ins in the simulator ----

if is_simulator():

    def load4(array, j):  # type: ignore[no-redef]
        """Elements 4j .. 4j+3 of ``array`` (the simulator's stand-in for one 16-byte load)."""
        k = 4 * j
        return array[k], array[k + 1], array[k + 2], array[k + 3]

    def store4(array, j, x, y, z, w):  # type: ignore[no-redef]
        """Write elements 4j .. 4j+3 (the simulator's stand-in for one 16-byte store)."""
        k = 4 * j
        array[k], array[k + 1], array[k + 2], array[k + 3] = x, y, z, w

    load4_cs, store4_cs = load4, store4

    def load_cs(array, i):  # type: ignore[no-redef]
        """``cuda.ldcs`` does not exist in the simulator: a plain load stands in."""
        return array[i]

    def store_cs(array, i, value):  # type: ignore[no-redef]
        """``cuda.stcs`` does not exist in the simulator: a plain store stands in."""
        array[i] = value

    def data_pointer(array):  # type: ignore[no-redef]
        raise GpuOnly("data_pointer is a GPU-only intrinsic")

    fused_vec4 = None

else:
    from llvmlite import ir
    from numba.core import types

    # cuda.ldcs / cuda.stcs are overloads whose bodies call these intrinsics; typing an
    # overload asks the driver for the current device, so the kernels call the
    # intrinsics directly and still compile to PTX on a machine without a GPU.
    from numba.cuda.cache_hints import ldcs_intrinsic as load_cs
    from numba.cuda.cache_hints import stcs_intrinsic as store_cs
    from numba.cuda.extending import intrinsic

    def _vector_pointer(context: Any, builder: Any, array_type: Any, array: Any, j: Any, j_type: Any) -> Any:
        """Address of the j-th group of four elements, as a pointer to a 4-vector."""
        data = context.make_array(array_type)(context, builder, array).data
        vector = ir.VectorType(context.get_value_type(array_type.dtype), 4)
        index = context.cast(builder, j, j_type, types.intp)
        return builder.gep(builder.bitcast(data, vector.as_pointer()), [index])

    def _make_load4(hint: str | None) -> Any:
        @intrinsic
        def load(typingctx: Any, array: Any, j: Any) -> Any:
            result = types.UniTuple(array.dtype, 4)

            def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
                pointer = _vector_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
                element = context.get_value_type(sig.args[0].dtype)
                if hint is None:  # an aligned vector load: NVVM emits ld.global.v4.f32
                    vector = builder.load(pointer, align=VECTOR_BYTES)
                    parts = [builder.extract_element(vector, ir.Constant(ir.IntType(32), k)) for k in range(4)]
                else:  # NVVM has no cache-hint vector load: write the PTX instruction
                    struct = ir.LiteralStructType([element] * 4)
                    asm = ir.InlineAsm(ir.FunctionType(struct, [pointer.type]),
                                       f"ld.global.{hint}.v4.f32 {{$0, $1, $2, $3}}, [$4];",
                                       "=f,=f,=f,=f,l")
                    loaded = builder.call(asm, [pointer])
                    parts = [builder.extract_value(loaded, k) for k in range(4)]
                return context.make_tuple(builder, result, parts)

            return result(array, j), codegen

        return load

    def _make_store4(hint: str | None) -> Any:
        @intrinsic
        def store(typingctx: Any, array: Any, j: Any, x: Any, y: Any, z: Any, w: Any) -> Any:
            def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
                pointer = _vector_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
                dtype = sig.args[0].dtype
                values = [context.cast(builder, v, t, dtype) for v, t in zip(args[2:], sig.args[2:])]
                if hint is None:
                    vector = ir.Constant(ir.VectorType(context.get_value_type(dtype), 4), ir.Undefined)
                    for k, v in enumerate(values):
                        vector = builder.insert_element(vector, v, ir.Constant(ir.IntType(32), k))
                    builder.store(vector, pointer, align=VECTOR_BYTES)
                else:
                    element = context.get_value_type(dtype)
                    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [pointer.type] + [element] * 4),
                                       f"st.global.{hint}.v4.f32 [$0], {{$1, $2, $3, $4}};",
                                       "l,f,f,f,f,~{memory}")
                    builder.call(asm, [pointer, *values])
                return context.get_dummy_value()

            return types.void(array, j, x, y, z, w), codegen

        return store

    load4 = _make_load4(None)
    store4 = _make_store4(None)
    load4_cs = _make_load4("cs")
    store4_cs = _make_store4("cs")

    @intrinsic
    def data_pointer(typingctx: Any, array: Any) -> Any:
        """The address of an array's first element, as a typed pointer (no cffi needed)."""

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            return context.make_array(sig.args[0])(context, builder, args[0]).data

        return types.CPointer(array.dtype)(array), codegen

    _float_ptr = types.CPointer(types.float32)
    fused_vec4 = cuda.declare_device(
        "fused_vec4",
        types.int32(_float_ptr, _float_ptr, _float_ptr, types.float32, _float_ptr, types.int64),
        link=str(CUDA_C_SOURCE),
    )


# --- the kernels ------------------------------------------------------------------------


@cuda.jit
def grid_stride_kernel(a, b, c, s, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)  # every thread of the grid, however many blocks it has
    for i in range(start, out.size, stride):
        out[i] = (a[i] + b[i]) * c[i] / s


@cuda.jit
def ilp4_kernel(a, b, c, s, out):
    # Each trip handles four elements one grid apart, so a warp still reads
    # neighbouring addresses; all twelve loads are issued before any arithmetic.
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = out.size
    i = start
    while i + 3 * stride < n:
        a0, a1, a2, a3 = a[i], a[i + stride], a[i + 2 * stride], a[i + 3 * stride]
        b0, b1, b2, b3 = b[i], b[i + stride], b[i + 2 * stride], b[i + 3 * stride]
        c0, c1, c2, c3 = c[i], c[i + stride], c[i + 2 * stride], c[i + 3 * stride]
        out[i] = (a0 + b0) * c0 / s
        out[i + stride] = (a1 + b1) * c1 / s
        out[i + 2 * stride] = (a2 + b2) * c2 / s
        out[i + 3 * stride] = (a3 + b3) * c3 / s
        i += 4 * stride
    while i < n:  # the tail: fewer than four grids' worth of elements remain
        out[i] = (a[i] + b[i]) * c[i] / s
        i += stride


@cuda.jit
def streaming_kernel(a, b, c, s, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, out.size, stride):
        # .cs ("cache streaming"): these lines are used once, evict them first
        store_cs(out, i, (load_cs(a, i) + load_cs(b, i)) * load_cs(c, i) / s)


@cuda.jit
def vec4_kernel(a, b, c, s, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    groups = out.size // 4
    for j in range(start, groups, stride):  # j-th group of four: one 16-byte load per array
        a0, a1, a2, a3 = load4(a, j)
        b0, b1, b2, b3 = load4(b, j)
        c0, c1, c2, c3 = load4(c, j)
        store4(out, j, (a0 + b0) * c0 / s, (a1 + b1) * c1 / s, (a2 + b2) * c2 / s, (a3 + b3) * c3 / s)
    i = 4 * groups + start  # the last n % 4 elements, one scalar each
    if i < out.size:
        out[i] = (a[i] + b[i]) * c[i] / s


@cuda.jit
def vec4_streaming_kernel(a, b, c, s, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    groups = out.size // 4
    for j in range(start, groups, stride):
        a0, a1, a2, a3 = load4_cs(a, j)
        b0, b1, b2, b3 = load4_cs(b, j)
        c0, c1, c2, c3 = load4_cs(c, j)
        store4_cs(out, j, (a0 + b0) * c0 / s, (a1 + b1) * c1 / s, (a2 + b2) * c2 / s, (a3 + b3) * c3 / s)
    i = 4 * groups + start
    if i < out.size:
        out[i] = (a[i] + b[i]) * c[i] / s


@cuda.jit
def linked_cuda_c_kernel(a, b, c, s, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    groups = out.size // 4
    pa, pb, pc, pout = data_pointer(a), data_pointer(b), data_pointer(c), data_pointer(out)
    for j in range(start, groups, stride):
        fused_vec4(pa, pb, pc, s, pout, j)  # CUDA C: three float4 loads, one float4 store
    i = 4 * groups + start
    if i < out.size:
        out[i] = (a[i] + b[i]) * c[i] / s


@cuda.jit
def stream3_kernel(a, b, c, s, out):
    # The ceiling probe: the same 3-read/1-write traffic, 16-byte accesses, two adds.
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    groups = out.size // 4
    for j in range(start, groups, stride):
        a0, a1, a2, a3 = load4(a, j)
        b0, b1, b2, b3 = load4(b, j)
        c0, c1, c2, c3 = load4(c, j)
        store4(out, j, a0 + b0 + c0, a1 + b1 + c1, a2 + b2 + c2, a3 + b3 + c3)
    i = 4 * groups + start
    if i < out.size:
        out[i] = a[i] + b[i] + c[i]


# --- launch configuration -----------------------------------------------------------------


def resident_blocks_per_sm(registers_per_thread: int | None, block_size: int = BLOCK_SIZE) -> int:
    """Blocks of ``block_size`` threads that fit on one SM at once (an H100/H200's limits).

    Threads: 2048 per SM.  Registers: 65536 per SM, allocated per warp in units of
    256.  Blocks: 32 per SM.  Without a register count only the thread limit applies.
    """
    if block_size <= 0 or block_size % 32:
        raise ValueError(f"block_size must be a positive multiple of 32, got {block_size}")
    by_threads = 2048 // block_size
    if not registers_per_thread:
        return min(by_threads, 32)
    per_warp = -(-registers_per_thread * 32 // 256) * 256
    warps = 65536 // per_warp
    return max(1, min(by_threads, warps // (block_size // 32), 32))


def resident_grid(kernel: Any, args: tuple[Any, ...], work_items: int) -> int:
    """Blocks for a grid-stride kernel: as many as the device holds at once, no more than needed.

    On a GPU the count is SMs x resident blocks per SM (from the kernel's register
    use).  In the simulator, which has no SMs, it is a small fixed grid of 2 blocks
    so the loop really strides.
    """
    needed = blocks_for(max(work_items, 1))
    if is_simulator():
        return min(needed, 2)
    sms = sm_count() or 1
    return min(needed, sms * resident_blocks_per_sm(registers_per_thread(kernel, args)))


_REGISTERS: dict[tuple[Any, ...], int] = {}


def registers_per_thread(kernel: Any, args: tuple[Any, ...]) -> int:
    """Registers per thread of ``kernel`` compiled for ``args`` on this GPU (compiles it once)."""
    from numba import typeof

    signature = tuple(typeof(x) for x in args)
    key = (kernel, signature)
    if key not in _REGISTERS:
        _REGISTERS[key] = int(kernel.compile(signature).regs_per_thread)
    return _REGISTERS[key]


def data_address(name: str, array: Any) -> int:
    """The device address of ``array``'s first element (host address in the simulator)."""
    interface = getattr(array, "__cuda_array_interface__", None) if not is_simulator() else None
    if interface is None:
        try:
            interface = array.__array_interface__
        except AttributeError as exc:
            raise TypeError(f"`{name}` exposes no array interface to read its address from") from exc
    return int(interface["data"][0])


def require_aligned(arrays: dict[str, Any], alignment: int = VECTOR_BYTES) -> None:
    """Raise :class:`MisalignedArray` unless every array's data starts on an ``alignment`` boundary."""
    for name, array in arrays.items():
        offset = data_address(name, array) % alignment
        if offset:
            raise MisalignedArray(
                f"`{name}` starts {offset} bytes past a {alignment}-byte boundary (a sliced view such "
                f"as x[1:]?); the 16-byte vector kernels need aligned data. Pass a fresh array "
                f"(cuda.device_array / cuda.to_device), or use a scalar variant such as 'grid_stride'."
            )


# --- the launchers -------------------------------------------------------------------------


def _checked(a: Any, b: Any, c: Any, out: Any) -> int:
    return check_elementwise({"a": a, "b": b, "c": c, "out": out})


def run_naive(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
    """Notebook 03's kernel, unchanged: one element per thread, ceil(n / 256) blocks."""
    n = _checked(a, b, c, out)
    fused_kernel[blocks_for(n), BLOCK_SIZE](a, b, c, a.dtype.type(s), out)


def _launch_resident(kernel: Any, work_items: Callable[[int], int]) -> Callable[..., None]:
    def launch(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
        n = _checked(a, b, c, out)
        args = (a, b, c, a.dtype.type(s), out)
        kernel[resident_grid(kernel, args, work_items(n)), BLOCK_SIZE](*args)

    return launch


def _launch_vector(kernel: Any) -> Callable[..., None]:
    def launch(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
        n = _checked(a, b, c, out)
        require_aligned({"a": a, "b": b, "c": c, "out": out})
        # one thread per group of four, and at least three threads for the scalar tail
        kernel[blocks_for(max(n // 4, 3)), BLOCK_SIZE](a, b, c, a.dtype.type(s), out)

    return launch


def _launch_vector_resident(kernel: Any) -> Callable[..., None]:
    resident = _launch_resident(kernel, lambda n: max(n // 4, 3))

    def launch(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
        _checked(a, b, c, out)
        require_aligned({"a": a, "b": b, "c": c, "out": out})
        resident(a, b, c, s, out)

    return launch


def run_linked_cuda_c(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
    """The CUDA C ``float4`` device function, linked into a Numba kernel (GPU only)."""
    if is_simulator():
        raise GpuOnly(
            "the linked CUDA C variant needs a GPU: the simulator runs Python, not CUDA C. "
            "Its PTX can still be read with ptx_evidence()."
        )
    _launch_vector(linked_cuda_c_kernel)(a, b, c, s, out)


@dataclass(frozen=True)
class Variant:
    """One step toward the roofline: its kernel, how it is launched, what it changes."""

    name: str
    kernel: Any
    launch: Callable[..., None]
    change: str
    elements_per_access: int  # float32 elements one global load moves
    aligned_only: bool
    gpu_only: bool = False


VARIANT_INFO: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant("naive", fused_kernel, run_naive, "notebook 03: one element per thread, full grid", 1, False),
        Variant("grid_stride", grid_stride_kernel, _launch_resident(grid_stride_kernel, lambda n: n),
                "grid-stride loop, grid = SMs x resident blocks per SM", 1, False),
        Variant("ilp4", ilp4_kernel, _launch_resident(ilp4_kernel, lambda n: (n + 3) // 4),
                "four independent elements per thread per trip", 1, False),
        Variant("streaming", streaming_kernel, _launch_resident(streaming_kernel, lambda n: n),
                "grid-stride with cuda.ldcs / cuda.stcs (evict-first)", 1, False),
        Variant("vec4", vec4_kernel, _launch_vector(vec4_kernel),
                "16-byte loads/stores via @intrinsic, one float4 per thread", 4, True),
        Variant("vec4_resident", vec4_kernel, _launch_vector_resident(vec4_kernel),
                "16-byte loads/stores, grid = SMs x resident blocks per SM", 4, True),
        Variant("vec4_streaming", vec4_streaming_kernel, _launch_vector(vec4_streaming_kernel),
                "16-byte loads/stores with the .cs hint (inline PTX)", 4, True),
        Variant("linked_cuda_c", linked_cuda_c_kernel, run_linked_cuda_c,
                "CUDA C float4 device function linked with link=", 4, True, gpu_only=True),
    ]
}

VARIANTS: dict[str, Callable[..., None]] = {name: v.launch for name, v in VARIANT_INFO.items()}
"""Name -> launcher ``(a, b, c, s, out)``, in the order the notebook tries them."""

DEFAULT_BEST = "vec4"
SCALAR_FALLBACK = "grid_stride"


def run_stream3(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
    """The fair ceiling probe: ``out = a + b + c`` with 16-byte accesses (3 reads, 1 write)."""
    _launch_vector(stream3_kernel)(a, b, c, s, out)


def best_variant_name() -> str:
    """The fastest variant at 2^28 in the committed H200 results, else :data:`DEFAULT_BEST`.

    In the simulator a GPU-only winner is replaced by :data:`DEFAULT_BEST`.
    """

    try:
        best = load(Roofline).best_variant
    except ResultError:
        best = None
    if best not in VARIANT_INFO or (is_simulator() and VARIANT_INFO[best].gpu_only):
        return DEFAULT_BEST
    return best


def best_fused(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
    """Launch the best fused variant; for misaligned views, the best scalar one instead."""
    name = best_variant_name()
    try:
        VARIANTS[name](a, b, c, s, out)
    except MisalignedArray:
        VARIANTS[SCALAR_FALLBACK](a, b, c, s, out)


# --- evidence: the compiled code of each variant ---------------------------------------------

_LOAD_STORE_RE = re.compile(r"^\s*(?:@%p\d+\s+)?((?:ld|st)\.(?:global|local)?[\w.]*|(?:ld|st)\.v\d[\w.]*)\s", re.M)
_CALL_RE = re.compile(r"\bcall(?:\.uni)?\b")


@dataclass(frozen=True)
class Evidence:
    """What the compiler made of one variant (PTX for cc ``cc``)."""

    name: str
    ptx: str
    opcodes: dict[str, int]  # global/local load and store opcodes -> how many in the PTX
    calls: int  # call instructions (the linked variant calls its CUDA C function)
    registers: int | None  # ptxas's count through nvJitLink, when available
    linked_ptx: str | None = None  # the CUDA C function's PTX (NVRTC), for the linked variant

    @property
    def widest_load_bytes(self) -> int:
        return max((access_bytes(op) for op in self._all_opcodes() if op.startswith("ld.")), default=0)

    @property
    def widest_store_bytes(self) -> int:
        return max((access_bytes(op) for op in self._all_opcodes() if op.startswith("st.")), default=0)

    def _all_opcodes(self) -> list[str]:
        extra = list(_opcode_counts(self.linked_ptx)) if self.linked_ptx else []
        return list(self.opcodes) + extra

    def vector_opcodes(self) -> list[str]:
        """The distinct 16-byte global opcodes, in this kernel or the function it links."""
        return sorted({op for op in self._all_opcodes() if ".v4." in op and ".param" not in op})


def _opcode_counts(ptx: str) -> dict[str, int]:
    body = ptx[ptx.find("{", max(ptx.find(".entry"), ptx.find(".func"))):]
    counts: dict[str, int] = {}
    for op in _LOAD_STORE_RE.findall(body):
        if op.startswith(("ld.param", "st.param")):
            continue
        counts[op] = counts.get(op, 0) + 1
    return dict(sorted(counts.items()))


def _source_fingerprint() -> str:
    import numba_cuda

    digest = hashlib.sha256()
    for path in (Path(__file__), CUDA_C_SOURCE):
        digest.update(path.read_bytes())
    digest.update(str(getattr(numba_cuda, "__version__", "")).encode())
    return digest.hexdigest()[:24]


def cuda_c_ptx(cc: tuple[int, int] = (9, 0)) -> str:
    """PTX of :data:`CUDA_C_SOURCE` from NVRTC (no GPU or driver needed)."""
    from cuda.bindings import nvrtc

    source = CUDA_C_SOURCE.read_bytes()
    err, program = nvrtc.nvrtcCreateProgram(source, CUDA_C_SOURCE.name.encode(), 0, [], [])
    _nvrtc_ok(err, "create")
    options = [f"--gpu-architecture=compute_{cc[0]}{cc[1]}".encode(), b"--relocatable-device-code=true"]
    (err,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(program)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(program, log)
        raise RuntimeError(f"NVRTC could not compile {CUDA_C_SOURCE.name}: {log.decode(errors='replace')}")
    err, size = nvrtc.nvrtcGetPTXSize(program)
    _nvrtc_ok(err, "size")
    buffer = b" " * size
    (err,) = nvrtc.nvrtcGetPTX(program, buffer)
    _nvrtc_ok(err, "get PTX")
    nvrtc.nvrtcDestroyProgram(program)
    return buffer.decode().rstrip("\x00")


def _nvrtc_ok(err: Any, step: str) -> None:
    from cuda.bindings import nvrtc

    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"NVRTC failed at {step}: {err}")


def _registers(ptx_files: list[str], kernel_name: str, cc: tuple[int, int]) -> int | None:
    """ptxas's register count for the entry named like ``kernel_name``, via nvJitLink."""
    try:
        from cuda.bindings import nvjitlink

        options = [f"-arch=sm_{cc[0]}{cc[1]}", "-verbose"]
        handle = nvjitlink.create(len(options), options)
        for k, text in enumerate(ptx_files):
            data = text.encode()
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), f"part{k}.ptx")
        nvjitlink.complete(handle)
        size = nvjitlink.get_info_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_info_log(handle, log)
        nvjitlink.destroy(handle)
    except Exception:  # nvJitLink is optional: the count is extra evidence, not a requirement
        return None
    text = log.decode(errors="replace")
    for block in re.split(r"Function properties for ", text)[1:]:
        name = block.split("'")[1] if "'" in block else block.split(":")[0]
        m = re.search(r"used (\d+) registers", block, re.I)
        if m and kernel_name in name:
            return int(m.group(1))
    return None


def _compile_all(cc: tuple[int, int]) -> dict[str, dict[str, Any]]:
    """Compile every variant (and the ceiling probe) with the real compiler; needs no GPU."""
    from numba.core import types

    array = types.Array(types.float32, 1, "C")
    signature = (array, array, array, types.float32, array)
    try:
        linked: str | None = cuda_c_ptx(cc)
    except Exception:  # NVRTC missing: the linked variant's evidence is then incomplete
        linked = None
    kernels = {name: v.kernel for name, v in VARIANT_INFO.items()}
    kernels["stream3"] = stream3_kernel
    out: dict[str, dict[str, Any]] = {}
    for name, kernel in kernels.items():
        ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc)
        is_linked = name == "linked_cuda_c"
        parts = [ptx, linked] if is_linked and linked else [ptx]
        out[name] = {
            "ptx": ptx,
            "registers": _registers(parts, kernel.py_func.__name__, cc),
            "linked_ptx": linked if is_linked else None,
        }
    return out


def compile_request(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """:func:`_compile_all` for ``request["cc"]`` (run with the real compiler by ``other_backend``)."""
    return _compile_all(tuple(request["cc"]))


def _cache_path(cc: tuple[int, int]) -> Path:

    return Path(cache_dir()) / f"roofline-{_source_fingerprint()}-sm{cc[0]}{cc[1]}.json"


@lru_cache(maxsize=4)
def _compiled(cc: tuple[int, int]) -> dict[str, dict[str, Any]]:
    path = _cache_path(cc)
    if path.exists():
        return json.loads(path.read_text())
    if is_simulator():  # numba.cuda is the simulator here: use the real compiler in a subprocess
        try:
            result = run_under(COMPILER, "helpers.lessons.roofline.roofline:compile_request", {"cc": list(cc)})
        except OtherBackendError as exc:
            raise RuntimeError(f"compiling the roofline kernels to PTX failed: {exc}") from exc
    else:
        result = _compile_all(cc)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)
    return result


def ptx_evidence(name: str, cc: tuple[int, int] = (9, 0)) -> Evidence:
    """The compiled evidence for one variant (or ``"stream3"``), for compute capability ``cc``.

    Fixed at cc (9, 0) by default so the answer is the same on a GPU and in the simulator.
    """
    compiled = _compiled(tuple(cc))
    if name not in compiled:
        raise KeyError(f"no variant named {name!r}; choose from {', '.join(compiled)}")
    entry = compiled[name]
    return Evidence(
        name=name,
        ptx=entry["ptx"],
        opcodes=_opcode_counts(entry["ptx"]),
        calls=len(_CALL_RE.findall(entry["ptx"])),
        registers=entry["registers"],
        linked_ptx=entry["linked_ptx"],
    )


def evidence_line(name: str, cc: tuple[int, int] = (9, 0)) -> str:
    """One backend-independent line: the widest load and store and the vector opcodes."""
    ev = ptx_evidence(name, cc)
    vector = ", ".join(ev.vector_opcodes()) or "none"
    where = " (in the linked CUDA C)" if ev.linked_ptx and ev.vector_opcodes() else ""
    return (f"{name:15s} widest load {ev.widest_load_bytes:2d} B, widest store {ev.widest_store_bytes:2d} B; "
            f"16-byte opcodes: {vector}{where}")


# --- the benchmark (GPU) and its plot ---------------------------------------------------------

BENCH_SIZES = (2**26, 2**26 + 3, 2**28, 2**28 + 3)
CHECK_SIZES = (2**26, 2**28)
NEAR_BEST_PERCENT = 97.0  # "at the roofline": within 3 % of the best streaming kernel of the same mix
FUSED_BYTES_PER_ELEMENT = 16  # float32: read a, b, c and write out, 4 bytes each


@dataclass
class Timed:
    """One kernel at one size: checked, then timed (GPU time, median of ``repeats``)."""

    median_ms: float | None = None
    iqr_ms: float | None = None
    repeats: int | None = None
    gbs: float | None = None
    bitwise_equal: bool | None = None
    registers: int | None = None
    error: str | None = None


@dataclass
class RooflineRun:
    """Every variant, the copy and the 3-read/1-write streaming kernels at one size."""

    copy: Timed
    variants: dict[str, Timed] = field(default_factory=dict)
    stream3: Timed | None = None
    torch_compile: Timed | None = None
    stream3_torch_compile: Timed | None = None

    def best_streaming_gbs(self) -> float | None:
        """The series' *best measurement* for this read/write mix: the faster 3:1 streaming kernel."""
        rates = [t.gbs for t in (self.stream3, self.stream3_torch_compile) if t is not None and t.gbs]
        return max(rates) if rates else None

    def fastest_variant(self) -> str | None:
        timed = {k: v.median_ms for k, v in self.variants.items() if v.median_ms is not None and v.bitwise_equal}
        return min(timed, key=timed.__getitem__) if timed else None

    def percent_of_best(self, entry: Timed) -> float | None:
        best = self.best_streaming_gbs()
        return None if best is None or entry.gbs is None else 100 * entry.gbs / best


@dataclass(kw_only=True)
class Roofline(Record):
    """Notebook 07's run: each fused variant against torch.compile and the 3:1 streaming kernels."""

    SCHEMA: ClassVar[str] = "roofline"
    VERSION: ClassVar[int] = 2
    expression: str
    dtype: str
    s: float
    bytes_per_element: int
    sizes: list[int]
    runs: dict[int, RooflineRun]
    best_variant: str | None = None
    claims: list[Claim] = field(default_factory=list)


def _timed(timing: Any, nbytes: int, **extra: Any) -> Timed:
    return Timed(median_ms=timing.median_ms, iqr_ms=timing.spread_ms, repeats=len(timing.samples_ms),
                 gbs=timing.bandwidth_gbs(nbytes), **extra)


def benchmark(sizes: tuple[int, ...] = BENCH_SIZES, repeats: int = 30, s: float = 1.7) -> Roofline:
    """Time every variant, torch.compile, the copy and the 3:1 streaming kernels in one run (GPU only).

    Every variant is first checked bitwise against NumPy at each size; a variant that
    fails or raises is recorded with its error, not timed.
    """
    if is_simulator():
        raise GpuOnly("the roofline benchmark times real kernels: run it on a GPU")
    try:
        import torch
    except ImportError:
        torch = None
    biggest = max(sizes)
    host = random_inputs(biggest, seed=7)
    full = [cuda.to_device(x) for x in host]
    full_out = cuda.device_array(biggest, dtype=np.float32)
    runs: dict[int, RooflineRun] = {}
    for n in sizes:
        a, b, c = (x[:n] for x in full)  # views from offset 0: still 16-byte aligned
        out = full_out[:n]
        nbytes = FUSED_BYTES_PER_ELEMENT * n
        expected = reference(host[0][:n], host[1][:n], host[2][:n], s)
        copy = copy_bandwidth(n, repeats=repeats)
        assert copy is not None
        row = RooflineRun(copy=Timed(median_ms=copy[0].median_ms, iqr_ms=copy[0].spread_ms, gbs=copy[1]))
        for name, launch in [*VARIANTS.items(), ("stream3", run_stream3)]:
            try:
                launch(a, b, c, s, poison(out))
                cuda.synchronize()
                got = out.copy_to_host()
                want = host[0][:n] + host[1][:n] + host[2][:n] if name == "stream3" else expected
                equal = bool(np.array_equal(got, want))
                timing = time_gpu(lambda: launch(a, b, c, s, out), label=name, repeats=repeats)
                kernel = stream3_kernel if name == "stream3" else VARIANT_INFO[name].kernel
                entry = _timed(timing, nbytes, bitwise_equal=equal,
                               registers=registers_per_thread(kernel, (a, b, c, a.dtype.type(s), out)))
            except Exception as exc:  # record, keep measuring the others
                entry = Timed(error=f"{type(exc).__name__}: {exc}"[:500])
            if name == "stream3":
                row.stream3 = entry
            else:
                row.variants[name] = entry
        if torch is not None:
            ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
            for label, fn, want in [
                ("torch_compile", lambda x, y, z: (x + y) * z / s, expected),
                ("stream3_torch_compile", lambda x, y, z: x + y + z, None),
            ]:
                try:
                    compiled = torch.compile(fn, dynamic=False)
                    result = compiled(ta, tb, tc)
                    torch.cuda.synchronize()
                    equal = None if want is None else bool(np.array_equal(result.cpu().numpy(), want))
                    del result
                    timing = time_gpu(lambda: compiled(ta, tb, tc), label=label, repeats=repeats)
                    entry = _timed(timing, nbytes, bitwise_equal=equal)
                except Exception as exc:
                    entry = Timed(error=f"{type(exc).__name__}: {exc}"[:500])
                setattr(row, label, entry)
            torch.cuda.empty_cache()
        runs[n] = row
    return summarize(Roofline(expression="out = (a + b) * c / s", dtype="float32", s=s,
                              bytes_per_element=FUSED_BYTES_PER_ELEMENT, sizes=list(sizes), runs=runs))


def summarize(record: Roofline) -> Roofline:
    """Name the best variant and check two claims at 2^26 and 2^28: near the best streaming kernel, and vs torch.compile."""
    claims: list[Claim] = []
    for n in CHECK_SIZES:
        row = record.runs.get(n)
        if row is None:
            continue
        best = row.fastest_variant()
        power = f"2^{n.bit_length() - 1}"
        if best is None:
            claims.append(Claim(f"a fused variant is correct and timed at {power}", None, "one or more", False))
            continue
        entry = row.variants[best]
        pct = row.percent_of_best(entry)
        claims.append(Claim(
            f"the fastest fused variant ({best}) is within {100 - NEAR_BEST_PERCENT:.0f}% of the best 3:1 streaming "
            f"kernel at {power}", pct, f">= {NEAR_BEST_PERCENT:.0f}%", None if pct is None else pct >= NEAR_BEST_PERCENT,
            "" if pct is None else f"{pct:.1f}%"))
        torch_ms = row.torch_compile.median_ms if row.torch_compile else None
        if torch_ms is not None and entry.median_ms is not None:
            diff = entry.median_ms / torch_ms - 1
            spread = max(entry.iqr_ms or 0.0, row.torch_compile.iqr_ms or 0.0)  # type: ignore[union-attr]
            tie = abs(entry.median_ms - torch_ms) <= spread
            claims.append(Claim(
                f"{best} is as fast as torch.compile at {power}", diff, "no slower, or within one interquartile range",
                entry.median_ms <= torch_ms or tie,
                f"{entry.median_ms:.4f} against {torch_ms:.4f} ms ({diff:+.1%}; interquartile range {spread * 1e3:.1f} µs)"))
    largest = record.runs.get(max(CHECK_SIZES))
    record.best_variant = largest.fastest_variant() if largest else None
    record.claims = claims
    return record


def plot_roofline(record: Roofline, n: int = 2**28) -> Any:
    """Bars: % of the best 3:1 streaming kernel for each variant and torch.compile at size ``n``."""
    import matplotlib.pyplot as plt

    row = record.runs[n]
    best = row.best_streaming_gbs()
    entries = [(name, e, "tab:blue") for name, e in row.variants.items()]
    entries += [(k, getattr(row, k), "tab:orange" if k == "torch_compile" else "tab:gray")
                for k in ("torch_compile", "stream3", "stream3_torch_compile") if getattr(row, k) is not None]
    shown = [(name, row.percent_of_best(e), color) for name, e, color in entries if row.percent_of_best(e) is not None]
    labels = [name for name, _, _ in shown]
    values = [v for _, v, _ in shown]
    colors = [c for _, _, c in shown]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    ax.barh(labels[::-1], values[::-1], color=colors[::-1])
    ax.axvline(100, color="black", lw=1)
    ax.axvline(NEAR_BEST_PERCENT, color="tab:red", lw=1, ls="--")
    ax.annotate(f"{NEAR_BEST_PERCENT:.0f}%", (NEAR_BEST_PERCENT, 1.0), xycoords=("data", "axes fraction"),
                ha="right", va="bottom", fontsize=8, color="tab:red")
    ax.set_xlabel(f"% of the best 3:1 streaming kernel ({best:,.0f} GB/s), n = {n:,}")
    ax.set_xlim(0, max(values + [100]) + 5)
    ax.set_title("out = (a + b) * c / s: fused variants against the best streaming kernel and torch.compile")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.lessons.roofline.roofline``: time every variant, write ``roofline.json`` and its plot."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m helpers.lessons.roofline.roofline", description=benchmark.__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed repeats per kernel and size")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/<gpu>)")
    args = parser.parse_args(argv)
    print(banner())
    if is_simulator():
        print("no GPU: the roofline benchmark times real kernels; nothing measured")
        return 0
    record = benchmark(repeats=args.repeats)
    path = save(record, folder=args.out)
    plot_roofline(record, 2**28).savefig(path.with_suffix(".png"), dpi=120)
    for n, row in record.runs.items():
        print(f"n = {n:,}: copy {row.copy.gbs:.0f} GB/s, best 3:1 streaming {row.best_streaming_gbs() or 0:.0f} GB/s")
        for name, e in [*row.variants.items(), ("stream3", row.stream3), ("torch_compile", row.torch_compile)]:
            if e is not None and e.median_ms is not None:
                print(f"  {name:22s} {e.median_ms:.3f} ms  {e.gbs:6.0f} GB/s  bitwise={e.bitwise_equal} regs={e.registers}")
            elif e is not None:
                print(f"  {name:22s} {e.error}")
    for claim in record.claims:
        print(claim.line())
    print("wrote", path, path.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
