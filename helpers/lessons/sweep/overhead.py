"""The host cost of one launch (``launch_overhead.json``): Numba lazy against an explicit signature, CuPy, PyTorch.

``issue_us``: per launch in a burst (the Python and driver cost); ``with_sync_us``: with the wait for the
burst; ``launch_and_wait_us``: one launch followed by ``cuda.synchronize()``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import random_inputs
from helpers.harness.campaign import DTYPE
from helpers.harness.peers import Unavailable, explicit_signature, require_gpu_module
from helpers.pipeline import add_kernel, fused_kernel
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import SIMULATOR_MESSAGE

from .record import LauncherCost, LaunchOverhead

ADD_SIGNATURE = "void(float32[::1], float32[::1], float32[::1])"
FUSED_SIGNATURE = "void(float32[::1], float32[::1], float32[::1], float32, float32[::1])"


def launchers(n: int) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """Each launcher of a tiny add or fused kernel, by label; and the libraries that cannot run here, with why."""
    a, b, c = (cuda.to_device(x) for x in random_inputs(n, dtype=DTYPE))
    out = cuda.device_array(n, DTYPE)
    s, blocks = DTYPE(2.0), blocks_for(n)
    add, fused = explicit_signature(add_kernel, ADD_SIGNATURE), explicit_signature(fused_kernel, FUSED_SIGNATURE)
    found: dict[str, Callable[[], Any]] = {
        "numba add, lazy @cuda.jit": lambda: add_kernel[blocks, BLOCK_SIZE](a, b, out),
        "numba add, explicit signature": lambda: add[blocks, BLOCK_SIZE](a, b, out),
        "numba fused, lazy @cuda.jit": lambda: fused_kernel[blocks, BLOCK_SIZE](a, b, c, s, out),
        "numba fused, explicit signature": lambda: fused[blocks, BLOCK_SIZE](a, b, c, s, out),
    }
    skipped: dict[str, str] = {}
    try:
        cupy = require_gpu_module("cupy")
        kernel = cupy.ElementwiseKernel("float32 a, float32 b", "float32 out", "out = a + b", "abc_add")
        ca, cb, cout = (cupy.asarray(x) for x in (a, b, out))
        found["cupy ElementwiseKernel (add)"] = lambda: kernel(ca, cb, cout)
    except Unavailable as why:
        skipped["cupy"] = str(why)
    try:
        torch = require_gpu_module("torch")
        ta, tb, tout = (torch.as_tensor(x, device="cuda") for x in (a, b, out))
        found["torch.add(out=)"] = lambda: torch.add(ta, tb, out=tout)
    except Unavailable as why:
        skipped["torch"] = str(why)
    return found, skipped


def launch_cost(launch: Callable[[], Any], launches: int, repeats: int) -> LauncherCost:
    """Host µs per launch in bursts of ``launches`` (issue, and with the wait), and of one launch and its wait."""
    for _ in range(20):
        launch()
    cuda.synchronize()
    issue, with_sync = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(launches):
            launch()
        t1 = time.perf_counter()
        cuda.synchronize()
        issue.append((t1 - t0) / launches * 1e6)
        with_sync.append((time.perf_counter() - t0) / launches * 1e6)
    single = []
    for _ in range(100):
        t0 = time.perf_counter()
        launch()
        cuda.synchronize()
        single.append((time.perf_counter() - t0) * 1e6)
    return LauncherCost(issue_us=statistics.median(issue), with_sync_us=statistics.median(with_sync),
                        launch_and_wait_us=statistics.median(single), issue_samples_us=issue,
                        launch_and_wait_samples_us=single)


def measure_launch_overhead(n: int = 1024, launches: int = 300, repeats: int = 9) -> LaunchOverhead:
    """Host cost of one launch, for every launcher of :func:`launchers` (none in the simulator)."""
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return LaunchOverhead(simulated=True, note="SIMULATED: launch overhead is not measured in the simulator")
    found, skipped = launchers(n)
    return LaunchOverhead(simulated=False, n=n, launches_per_burst=launches, repeats=repeats,
                          note="host wall clock (time.perf_counter) per launch on a tiny array",
                          launchers={label: launch_cost(launch, launches, repeats) for label, launch in found.items()},
                          skipped=skipped)
