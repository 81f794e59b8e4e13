"""Facts about the device, read in one place: name, SMs, compute capability, L2 size, clock,
peak FP32 arithmetic, and where compute starts to cost more than memory.

The peak is derived from the device's own attributes (SM count, clock) and the
FP32 lanes per SM of its architecture, so it is a *model*: measured bandwidth
divided into it gives the arithmetic intensity at which a kernel stops being
memory-bound (the roofline's knee).
"""

from __future__ import annotations

from functools import lru_cache

from .backend import COMPILER, SIMULATOR, is_simulator
from .sizes import BLOCK_SIZE


def device_name() -> str:
    """The GPU's name, or ``"simulator"``."""
    if is_simulator():
        return SIMULATOR
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def sm_count() -> int | None:
    """Streaming multiprocessors on the current GPU (``None`` in the simulator)."""
    if is_simulator():
        return None
    from numba import cuda

    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


def compute_capability() -> tuple[int, int]:
    """The GPU's compute capability; (9, 0), an H100/H200, stands in for the simulator."""
    if is_simulator():
        return (9, 0)
    from numba import cuda

    return tuple(cuda.get_current_device().compute_capability)  # type: ignore[return-value]


def banner() -> str:
    """One line naming the backend, e.g. ``backend: gpu (NVIDIA H200, 132 SMs)``."""
    if is_simulator():
        return "backend: simulator"
    compiler = f", compiled by {COMPILER[0]}" if COMPILER[0] else ""
    return f"backend: gpu ({device_name()}, {sm_count()} SMs{compiler})"

@lru_cache(maxsize=1)
def l2_bytes() -> int | None:
    """The L2 cache size in bytes as the device reports it (60 MiB on an H200), or ``None`` in the simulator."""
    if is_simulator():
        return None
    from numba import cuda

    return int(cuda.get_current_device().L2_CACHE_SIZE)


def total_memory_bytes() -> int | None:
    """The device's memory in bytes as the driver reports it, or ``None`` in the simulator."""
    if is_simulator():
        return None
    from numba import cuda

    return int(cuda.current_context().get_memory_info()[1])


# The memory bandwidth each GPU's datasheet states (GB/s): the series' one *bound*.  The one
# *best measurement* beside it is the fastest streaming kernel this project measured with the
# same read/write mix (see helpers.lessons.roofline.ceiling).
DATASHEET_BANDWIDTH_GBS = {"NVIDIA H200": 4800.0, "NVIDIA H100 80GB HBM3": 3350.0}


def datasheet_bandwidth_gbs(name: str | None = None) -> float | None:
    """The datasheet's memory bandwidth of ``name`` (default: this GPU) in GB/s, if this table knows it."""
    return DATASHEET_BANDWIDTH_GBS.get(name or device_name())


# FP32 lanes per SM by compute capability (CUDA C Programming Guide, arithmetic throughput table).
FP32_LANES_PER_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128,
                     (10, 0): 128, (12, 0): 128}


def clock_hz() -> float | None:
    """The SM clock the driver reports (its maximum boost clock), or ``None`` in the simulator."""
    if is_simulator():
        return None
    from numba import cuda

    return cuda.get_current_device().CLOCK_RATE * 1e3  # reported in kHz


def peak_fp32_flops() -> float | None:
    """SMs x FP32 lanes x 2 (a fused multiply-add is two operations) x clock."""
    if is_simulator():
        return None
    lanes = FP32_LANES_PER_SM.get(compute_capability(), 128)
    return float(sm_count()) * lanes * 2 * clock_hz()  # type: ignore[arg-type, operator]


def knee_fmas_per_element(peak_flops: float, bandwidth_bytes_per_s: float, bytes_per_element: float) -> float:
    """FMAs per element at which arithmetic time equals memory time.

    Memory time per element is ``bytes / bandwidth``; arithmetic time is
    ``2 * fmas / peak``.  Setting them equal gives ``fmas = bytes * peak / (2 * bandwidth)``.
    """
    if min(peak_flops, bandwidth_bytes_per_s, bytes_per_element) <= 0:
        raise ValueError("peak, bandwidth and bytes per element must all be positive")
    return bytes_per_element * peak_flops / (2 * bandwidth_bytes_per_s)


# --- what one block may use -------------------------------------------------------------

REGISTER_ALLOCATION_UNIT = 256
"""Registers are handed to a warp in units of 256 (Volta to Hopper), so a thread's count rounds up."""


class LaunchTooLarge(ValueError):
    """A launch asks one block for more registers or shared memory than an SM can give it."""


def block_limits() -> tuple[int, int] | None:
    """Registers and bytes of shared memory one block may use on this GPU (``None`` in the simulator)."""
    if is_simulator():
        return None
    from numba import cuda

    device = cuda.get_current_device()
    return int(device.MAX_REGISTERS_PER_BLOCK), int(device.MAX_SHARED_MEMORY_PER_BLOCK)


def launch_problem(threads: int, registers_per_thread: int, shared_bytes: int,
                   registers_per_block: int, shared_per_block: int) -> str | None:
    """Why a block of ``threads`` does not fit on an SM, or ``None`` when it does."""
    warps = -(-threads // 32)
    per_warp = -(-registers_per_thread * 32 // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    if warps * per_warp > registers_per_block:
        most = registers_per_block // per_warp * 32
        return (f"{threads} threads x {registers_per_thread} registers each need {warps * per_warp} registers, "
                f"and one block may use {registers_per_block}: use at most {most} threads per block")
    if shared_bytes > shared_per_block:
        return f"the block needs {shared_bytes} bytes of shared memory, and one block may use {shared_per_block}"
    return None


def _compiled(kernel: object, args: tuple) -> object:
    """``kernel`` compiled for the types of ``args`` (Numba compiles each signature once)."""
    signature = tuple(kernel.typeof_pyval(a) for a in args)  # type: ignore[attr-defined]
    compiled = kernel.compile(signature)  # type: ignore[attr-defined]
    if hasattr(compiled, "_ensure_kernel_attrs"):  # numba-cuda-mlir asks the driver for them on first use
        compiled._ensure_kernel_attrs()
    return compiled


def check_launch_fits(kernel: object, args: tuple, threads: int, what: str) -> None:
    """Raise :class:`LaunchTooLarge` before a launch the GPU would refuse (a no-op in the simulator)."""
    limits = block_limits()
    if limits is None:
        return
    compiled = _compiled(kernel, args)
    registers, shared = int(compiled.regs_per_thread), int(compiled.shared_mem_per_block)  # type: ignore[attr-defined]
    problem = launch_problem(threads, registers, shared, *limits)
    if problem is not None:
        raise LaunchTooLarge(f"{what} cannot be launched on this GPU: {problem}.")


def registers_per_thread(kernel: object, args: tuple | None = None) -> int | None:
    """Registers per thread the compiler gave ``kernel``, read from the compiled kernel.

    With ``args``: the version for their types (compiled now if need be).  Without: the most
    over the versions compiled so far (``None`` if there are none).  ``None`` in the simulator,
    which compiles nothing.
    """
    if is_simulator():
        return None
    if args is not None:
        return int(_compiled(kernel, args).regs_per_thread)  # type: ignore[attr-defined]
    counts = kernel.get_regs_per_thread()  # type: ignore[attr-defined]
    counts = list(counts.values()) if isinstance(counts, dict) else [counts]
    return int(max(counts)) if counts else None


# --- how many blocks one SM holds at once -------------------------------------------------

HOPPER_SM = {"threads": 2048, "registers": 65536, "blocks": 32, "shared_bytes": 233472, "reserved_shared_bytes": 1024}
"""What one SM of an H100 or H200 (compute capability 9.0) holds: the simulator's stand-in."""


@lru_cache(maxsize=1)
def sm_limits() -> dict[str, int]:
    """Resident threads, registers, blocks and shared-memory bytes of one SM (and the bytes the driver
    keeps per block), read from the device's attributes; :data:`HOPPER_SM` in the simulator."""
    if is_simulator():
        return dict(HOPPER_SM)
    from numba import cuda

    device = cuda.get_current_device()
    return {"threads": int(device.MAX_THREADS_PER_MULTIPROCESSOR),
            "registers": int(device.MAX_REGISTERS_PER_MULTIPROCESSOR),
            "blocks": int(device.MAX_BLOCKS_PER_MULTIPROCESSOR),
            "shared_bytes": int(device.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            "reserved_shared_bytes": int(device.RESERVED_SHARED_MEMORY_PER_BLOCK)}


def resident_blocks_per_sm(registers_per_thread: int | None, block_size: int = BLOCK_SIZE,
                           shared_bytes: int = 0) -> int:
    """Blocks of ``block_size`` threads that one SM holds at once (its occupancy, in blocks).

    The least of what the SM's threads, registers (handed to a warp in units of
    :data:`REGISTER_ALLOCATION_UNIT`), shared memory and block slots allow (:func:`sm_limits`).
    Without a register count the registers set no limit.  0: one block does not fit.
    """
    if block_size <= 0 or block_size % 32:
        raise ValueError(f"block_size must be a positive multiple of 32, got {block_size}")
    if shared_bytes < 0:
        raise ValueError(f"shared_bytes must be 0 or more, got {shared_bytes}")
    limits = sm_limits()
    fits = [limits["blocks"], limits["threads"] // block_size,
            limits["shared_bytes"] // (shared_bytes + limits["reserved_shared_bytes"])]
    if registers_per_thread:
        per_warp = -(-registers_per_thread * 32 // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
        fits.append(limits["registers"] // per_warp // (block_size // 32))
    return min(fits)
