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
kernel's *logic* (bounds, tail, results), while
:func:`helpers.lessons.roofline.evidence.ptx_evidence` compiles the real kernels to PTX --
in a subprocess on the real compiler -- for the *instructions*.  The linked CUDA C
variant runs on a GPU only.

Notebook 07's cells are the source of the kernels it shows (and of ``_make_load4``),
copied here between the export markers by ``scripts/export_kernels.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from numba import cuda

from helpers.backend import COMPILER, is_simulator
from helpers.device import registers_per_thread, resident_blocks_per_sm, sm_count
from helpers.harness.peers import Unavailable
from helpers.pipeline import fused_kernel
from helpers.results import ResultError, load
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.validate import check_elementwise

from .record import Roofline

CUDA_C_SOURCE = Path(__file__).resolve().parent / "fused_vec4.cu"
VECTOR_BYTES = 16
"""One ``float4``: the widest load a thread can issue in one instruction."""


class MisalignedArray(ValueError):
    """A 16-byte vector kernel was given an array whose data is not 16-byte aligned."""


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
        raise Unavailable("data_pointer is a GPU-only intrinsic")

    fused_vec4 = None

else:
    from llvmlite import ir
    from numba.core import types

    # cuda.ldcs / cuda.stcs are overloads whose bodies call these intrinsics; typing an
    # overload asks the driver for the current device, so the kernels call the
    # intrinsics directly and still compile to PTX on a machine without a GPU.
    if COMPILER[0]:  # numba-cuda-mlir types cuda.ldcs / cuda.stcs itself, with or without a GPU
        load_cs, store_cs = cuda.ldcs, cuda.stcs
    else:
        from numba.cuda.cache_hints import ldcs_intrinsic as load_cs
        from numba.cuda.cache_hints import stcs_intrinsic as store_cs
    from numba.cuda.extending import intrinsic

    def _vector_pointer(context: Any, builder: Any, array_type: Any, array: Any, j: Any, j_type: Any) -> Any:
        """Address of the j-th group of four elements, as a pointer to a 4-vector."""
        data = context.make_array(array_type)(context, builder, array).data
        vector = ir.VectorType(context.get_value_type(array_type.dtype), 4)
        index = context.cast(builder, j, j_type, types.intp)
        return builder.gep(builder.bitcast(data, vector.as_pointer()), [index])

    # >>> exported from notebooks/07_the_last_fifteen_percent.ipynb (the cell defining _make_load4);
    # >>> edit the notebook, then run python scripts/export_kernels.py
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
    # <<< end of the export from notebooks/07_the_last_fifteen_percent.ipynb

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


# >>> exported from notebooks/07_the_last_fifteen_percent.ipynb (the cell defining grid_stride_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def grid_stride_kernel(a, b, c, s, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)  # every thread of the grid, however many blocks it has
    for i in range(start, out.size, stride):
        out[i] = (a[i] + b[i]) * c[i] / s
# <<< end of the export from notebooks/07_the_last_fifteen_percent.ipynb


# >>> exported from notebooks/07_the_last_fifteen_percent.ipynb (the cell defining ilp4_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
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
# <<< end of the export from notebooks/07_the_last_fifteen_percent.ipynb


# >>> exported from notebooks/07_the_last_fifteen_percent.ipynb (the cell defining streaming_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def streaming_kernel(a, b, c, s, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, out.size, stride):
        # .cs ("cache streaming"): these lines are used once, evict them first
        store_cs(out, i, (load_cs(a, i) + load_cs(b, i)) * load_cs(c, i) / s)
# <<< end of the export from notebooks/07_the_last_fifteen_percent.ipynb


# >>> exported from notebooks/07_the_last_fifteen_percent.ipynb (the cell defining vec4_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
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
# <<< end of the export from notebooks/07_the_last_fifteen_percent.ipynb


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


# >>> exported from notebooks/07_the_last_fifteen_percent.ipynb (the cell defining linked_cuda_c_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
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
# <<< end of the export from notebooks/07_the_last_fifteen_percent.ipynb


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
    return min(needed, sms * max(1, resident_blocks_per_sm(registers_per_thread(kernel, args))))


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


def require_llvmlite(what: str) -> None:
    """Raise :class:`Unavailable` under numba-cuda-mlir, which cannot lower ``what``'s llvmlite ``@intrinsic``."""
    if COMPILER[0]:
        raise Unavailable(f"{COMPILER[0]} lowers kernels through MLIR, not llvmlite, so {what} "
                          "cannot be compiled: it needs numba-cuda")


def require_flat_and_aligned(arrays: dict[str, Any], what: str) -> None:
    """For a kernel that reads arrays as flat runs of float4s: numba-cuda, and contiguous, 16-byte-aligned arrays."""
    require_llvmlite(f"{what} (its 16-byte accesses are an @intrinsic)")
    for name, array in arrays.items():
        if not is_simulator() and not array.is_c_contiguous():
            raise ValueError(f"`{name}` must be C-contiguous: {what} reads it as one flat array")
    require_aligned(arrays)


def llvmlite_only(launch: Callable[..., None]) -> Callable[..., None]:
    """A launcher whose kernel calls an llvmlite ``@intrinsic``, which numba-cuda-mlir cannot lower."""

    def checked(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
        require_llvmlite("this kernel's @intrinsic (a 16-byte access, or a pointer for the linked CUDA C)")
        launch(a, b, c, s, out)

    return checked


def run_linked_cuda_c(a: Any, b: Any, c: Any, s: float, out: Any) -> None:
    """The CUDA C ``float4`` device function, linked into a Numba kernel (GPU only)."""
    if is_simulator():
        raise Unavailable(
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
        Variant("vec4", vec4_kernel, llvmlite_only(_launch_vector(vec4_kernel)),
                "16-byte loads/stores via @intrinsic, one float4 per thread", 4, True),
        Variant("vec4_resident", vec4_kernel, llvmlite_only(_launch_vector_resident(vec4_kernel)),
                "16-byte loads/stores, grid = SMs x resident blocks per SM", 4, True),
        Variant("vec4_streaming", vec4_streaming_kernel, llvmlite_only(_launch_vector(vec4_streaming_kernel)),
                "16-byte loads/stores with the .cs hint (inline PTX)", 4, True),
        Variant("linked_cuda_c", linked_cuda_c_kernel, llvmlite_only(run_linked_cuda_c),
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
