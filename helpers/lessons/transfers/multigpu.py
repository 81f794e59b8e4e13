"""Between cards: how many times must data move when the pipeline spans two GPUs.

:func:`peer_copy_bandwidth` copies from GPU ``src`` to ``dst`` directly where peer access can be enabled,
else staged through pinned host memory; :func:`split_pipeline` runs add on GPU0 and multiply, scale on
GPU1, checked, timed beside both pipelines on GPU0.  In the simulator, or with fewer than two GPUs,
every measuring function prints why and returns ``None``.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from numba import cuda
from numba.cuda.cudadrv.driver import CudaAPIError

from helpers.backend import is_simulator, uncoloured
from helpers.checks import check_close, poison, poisoned, random_inputs
from helpers.pipeline import add_kernel, launch_fused, launch_three, multiply_kernel, reference, scale_kernel
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import Timing, time_gpu

NVLINK = re.compile(r"^NV(\d+)$")
PCIE_PATHS = {  # the legend of `nvidia-smi topo -m`, in short
    "PIX": "PCIe, through at most one PCIe switch",
    "PXB": "PCIe, through several PCIe switches",
    "PHB": "PCIe, through a host bridge (the CPU)",
    "NODE": "PCIe, between host bridges within one NUMA node",
    "SYS": "PCIe and the CPU interconnect between NUMA nodes",
}


def needs_two_gpus(found: int) -> str:
    """The one message every two-GPU measurement gives when it cannot run."""
    return f"needs two GPUs; found {found}"


def gpu_count() -> int:
    """CUDA devices visible to Numba (0 in the simulator, whose one fake GPU measures nothing)."""
    return 0 if is_simulator() else len(cuda.gpus)


def ready(src: int, dst: int) -> bool:
    """True when GPUs ``src`` and ``dst`` exist and differ; otherwise say why and return False."""
    found = gpu_count()
    if found < 2:
        print(f"skipped: {needs_two_gpus(found)}" + (" (the CUDA simulator)" if is_simulator() else ""))
        return False
    if src == dst or not (0 <= src < found and 0 <= dst < found):
        raise ValueError(f"src and dst must be two different GPUs among 0..{found - 1}, got {src} and {dst}")
    return True


def check_nbytes(nbytes: int) -> None:
    """A ``ValueError`` unless ``nbytes`` is a whole number of float32 elements."""
    if nbytes < 4 or nbytes % 4:
        raise ValueError(f"nbytes must be a positive multiple of 4 (float32 elements), got {nbytes}")


def peer_access(src: int, dst: int) -> bool:
    """Whether GPU ``dst`` can read and write GPU ``src``'s memory directly (cuDeviceCanAccessPeer)."""
    if gpu_count() < 2 or src == dst:
        return False
    return cuda.gpus[dst].get_primary_context().can_access_peer(src)


def enable_peer_access(src: int, dst: int) -> bool:
    """Let ``dst``'s context reach ``src``'s memory; False (after saying why) when it cannot."""
    if not peer_access(src, dst):
        print(f"no peer access from GPU{dst} to GPU{src}: copies are staged through the host")
        return False
    with cuda.gpus[dst]:
        try:
            cuda.current_context().enable_peer_access(cuda.gpus[src].get_primary_context().handle)
        except CudaAPIError as error:
            if "ALREADY_ENABLED" not in str(error) and getattr(error, "code", None) != 704:
                print(f"enabling peer access from GPU{dst} to GPU{src} failed ({error}): staging through the host")
                return False
    return True


@contextlib.contextmanager
def on_gpu(index: int) -> Iterator[None]:
    """Make GPU ``index`` current for Numba, and for CuPy when installed (used by library copies)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(cuda.gpus[index])
        try:
            import cupy  # CuPy is optional: its copies follow the current GPU only when it is there

            stack.enter_context(cupy.cuda.Device(index))
        except ImportError:
            pass
        yield


def parse_topology(text: str) -> dict[tuple[int, int], str]:
    """The GPU-to-GPU matrix of ``nvidia-smi topo -m``: ``{(0, 1): "NV18", ...}``."""
    lines = uncoloured(text).splitlines()
    header = next((line.split() for line in lines if re.match(r"^\s+GPU0\b", line)), None)
    if header is None:
        raise ValueError("no header row starting with GPU0 in the `nvidia-smi topo -m` text")
    gpus = [int(name[3:]) for name in header if re.fullmatch(r"GPU\d+", name)]
    matrix = {}
    for line in lines:
        cells = line.split()
        if cells and re.fullmatch(r"GPU\d+", cells[0]) and len(cells) > len(gpus):
            row = int(cells[0][3:])
            matrix.update({(row, col): cell for col, cell in zip(gpus, cells[1:]) if col != row})
    if not matrix:
        raise ValueError("no GPU rows in the `nvidia-smi topo -m` text")
    return matrix


def describe_link(code: str) -> dict[str, Any]:
    """Kind (NVLink, PCIe, unknown) and a phrase for one cell of the topology matrix."""
    match = NVLINK.match(code)
    if match:
        return {"code": code, "kind": "NVLink", "description": f"NVLink, {match.group(1)} bonded links"}
    if code in PCIE_PATHS:
        return {"code": code, "kind": "PCIe", "description": PCIE_PATHS[code]}
    return {"code": code, "kind": "unknown", "description": f"unrecognised topology code {code!r}"}


def link_between(src: int = 0, dst: int = 1) -> dict[str, Any]:
    """The link ``nvidia-smi topo -m`` reports between two GPUs (numbered by PCI bus, as CUDA's are on a host
    of identical GPUs), or why it is not known."""
    unknown = {"code": None, "kind": "unknown"}
    if shutil.which("nvidia-smi") is None:
        return {**unknown, "description": "nvidia-smi not found"}
    try:
        text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30, check=True).stdout
        code = parse_topology(text).get((src, dst))
    except (subprocess.SubprocessError, OSError, ValueError) as error:
        return {**unknown, "description": f"`nvidia-smi topo -m` gave no matrix: {error}"}
    return describe_link(code) if code else {**unknown, "description": f"GPU{src}-GPU{dst} not in the matrix"}


def link_bytes(copied: Sequence[Any]) -> int:
    """Bytes that crossed between GPUs: elements times item size, summed over the copied arrays."""
    total = 0
    for array in copied:
        if not (hasattr(array, "shape") and hasattr(array, "dtype")):
            raise TypeError(f"expected arrays (with shape and dtype), got {type(array).__name__}")
        total += int(np.prod(array.shape, dtype=np.int64)) * np.dtype(array.dtype).itemsize
    return total


def _summary(timing: Timing, **extra: Any) -> dict[str, Any]:
    return {"label": timing.label, "median_ms": timing.median_ms, "spread_ms": timing.spread_ms, **extra}


def _cross(source: Any, target: Any, src: int, dst: int, peer: bool, staging: Any) -> None:
    """Copy ``source`` (on ``src``) into ``target`` (on ``dst``); call with ``dst`` current."""
    if peer:
        target.copy_to_device(source)  # cuMemcpyDtoD between the two GPUs' addresses
    else:
        with cuda.gpus[src]:
            source.copy_to_host(staging)  # synchronous: the host waits for GPU src
        target.copy_to_device(staging)


def peer_copy_bandwidth(nbytes: int, src: int = 0, dst: int = 1, repeats: int = 20,
                        allow_peer: bool = True) -> dict[str, Any] | None:
    """Copy ``nbytes`` from GPU ``src`` to GPU ``dst``: path, timing and GB/s (bytes one way); ``allow_peer=False``
    goes through the host even where the direct path exists."""
    check_nbytes(nbytes)
    if not ready(src, dst):
        return None
    host = np.random.default_rng().random(nbytes // 4, dtype=np.float32)
    peer = allow_peer and enable_peer_access(src, dst)
    with on_gpu(src):
        source = cuda.to_device(host)
    with on_gpu(dst):
        target = cuda.to_device(np.full_like(host, np.nan))
        staging = None if peer else cuda.pinned_array(host.shape, dtype=np.float32)
        copy: Callable[[], None] = lambda: _cross(source, target, src, dst, peer, staging)  # noqa: E731
        copy()
        cuda.synchronize()
        if not np.array_equal(target.copy_to_host(), host):
            raise RuntimeError(f"the copy GPU{src}->GPU{dst} did not arrive intact")
        path = "peer (direct)" if peer else "staged through pinned host memory"
        # A staged copy is host-synchronous: a hold kernel would hide its first half.
        timing = time_gpu(copy, label=f"GPU{src}->GPU{dst}, {path}", repeats=repeats, hide_launch=peer)
    if timing is None:  # time_gpu said why (only reachable with fake GPUs in the simulator)
        return None
    return _summary(timing, path=path, nbytes=nbytes, gbs=timing.bandwidth_gbs(nbytes))


def checked_timings(runs: dict[str, tuple[Callable[[], None], Any]], expected: np.ndarray, repeats: int, *,
                    check: str = "{}", label: str = "{}", **timing: Any) -> dict[str, Timing | None]:
    """Each ``run`` checked against NumPy (its ``out``, host or device, poisoned first), then timed; ``check`` and
    ``label`` word the check's name and the timing's label from the run's."""
    timings = {}
    for name, (run, out) in runs.items():
        if isinstance(out, np.ndarray):
            out[:] = np.nan
        else:
            poison(out)
        run()
        cuda.synchronize()
        check_close(out, expected, name=f"out ({check.format(name)})")
        timings[name] = time_gpu(run, label=label.format(name), repeats=repeats, **timing)
    return timings


def _one_gpu(gpu: int, arrays: tuple[Any, ...], expected: np.ndarray, repeats: int) -> dict[str, Timing | None]:
    """The three-kernel and fused pipelines on GPU ``gpu`` (current), each checked against NumPy, then timed."""
    a, b, c, s, t1, t2, out = arrays
    return checked_timings({"three kernels": (lambda: launch_three(a, b, c, s, t1, t2, out), out),
                            "fused": (lambda: launch_fused(a, b, c, s, out), out)},
                           expected, repeats, check="{}, one GPU", label=f"{{}} on GPU{gpu}")


def split_pipeline(n: int, repeats: int = 20, src: int = 0, dst: int = 1) -> dict[str, Any] | None:
    """``(a + b) * c / s`` with add on GPU ``src`` and multiply, scale on ``dst``, checked, then timed (events on
    ``dst``, which waits for ``src``) beside both pipelines on ``src`` alone."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not ready(src, dst):
        return None
    a, b, c = random_inputs(n)
    s = np.float32(1.5)
    expected, blocks = reference(a, b, c, s), blocks_for(n)
    peer = enable_peer_access(src, dst)
    with on_gpu(src):
        a0, b0, c0 = (cuda.to_device(x) for x in (a, b, c))
        t1_0, t2_0, out_0 = poisoned(n), poisoned(n), poisoned(n)
        added = cuda.event()
    with on_gpu(dst):
        c1, t1_1, t2_1, out_1 = cuda.to_device(c), poisoned(n), poisoned(n), poisoned(n)
        go = cuda.event()
    staging = None if peer else cuda.pinned_array(n, dtype=np.float32)

    def split(copied: list[Any]) -> None:  # called with GPU dst current
        go.record()
        with cuda.gpus[src]:
            go.wait()  # GPU src starts when dst's timing has started
            add_kernel[blocks, BLOCK_SIZE](a0, b0, t1_0)
            added.record()
        added.wait()  # GPU dst waits for the add to finish
        _cross(t1_0, t1_1, src, dst, peer, staging)
        copied.append(t1_0)
        multiply_kernel[blocks, BLOCK_SIZE](t1_1, c1, t2_1)
        scale_kernel[blocks, BLOCK_SIZE](t2_1, s, out_1)

    copied: list[Any] = []
    with on_gpu(dst):
        split(copied)
        cuda.synchronize()
        check_close(out_1, expected, name="out (split over two GPUs)")
        timings: dict[str, Timing | None] = {"split": time_gpu(lambda: split([]), label="split: add on GPU0, multiply+scale on GPU1",
                                     repeats=repeats, hide_launch=peer)}
    with on_gpu(src):
        timings.update(_one_gpu(src, (a0, b0, c0, s, t1_0, t2_0, out_0), expected, repeats))
    crossed = link_bytes(copied)
    return {"n": n, "path": "peer (direct)" if peer else "staged through pinned host memory",
            "link_bytes": crossed, "link_bytes_per_element": crossed / n,
            "timings": {label: _summary(t) for label, t in timings.items() if t is not None}}


def gpu_name(index: int) -> str:
    """GPU ``index``'s name, as the driver gives it."""
    name = cuda.gpus[index].name
    return name.decode() if isinstance(name, bytes) else str(name)
