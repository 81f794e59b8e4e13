"""Notebook 06's comparison: the tiny fuser's kernel, the hand-written fused kernel and torch.compile.

All three compute ``(a + b) * c / s``; each is checked against NumPy, then timed two
ways, so that like is compared with like:

* **GPU time** -- CUDA events with the launch queued behind a short hold kernel
  (:func:`helpers.timing.time_gpu`), so the host's cost of issuing it is hidden;
* **host time per call** -- what issuing one call costs the Python thread
  (:func:`helpers.timing.host_enqueue_us`).

``python -m helpers.lessons.fuser`` writes ``fuser_vs_torch_compile.json``.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import poison, random_inputs
from helpers.device import banner
from helpers.harness.cli import Command
from helpers.lessons.fuser.fuser import fuse
from helpers.lessons.fuser.record import Contender, FuserRow, FuserVsCompile
from helpers.lessons.fuser.report import summary
from helpers.pipeline import fused_kernel, reference
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import host_enqueue_us, time_gpu

SIZES = (2**20, 2**24, 2**28)


def _contender(run: Callable[[], Any], result: Callable[[], np.ndarray], expected: np.ndarray, label: str) -> Contender:
    run()
    got = result()
    timing = time_gpu(run, label=label, repeats=50)
    assert timing is not None
    return Contender(equals_numpy=bool(np.array_equal(got, expected)), gpu_ms=timing.median_ms,
                     host_us=host_enqueue_us(run), max_abs_diff=float(np.max(np.abs(got - expected))))


def _torch_compiled() -> tuple[Any, Any]:
    """torch and the compiled expression, or ``(None, None)`` (after saying why) when torch.compile is unavailable."""
    try:
        import torch  # torch is optional: without it the Numba kernels are still measured

        return torch, torch.compile(lambda a, b, c, s: (a + b) * c / s, dynamic=False)
    except Exception as exc:  # torch missing or broken: still measure the Numba kernels
        print("torch.compile unavailable:", exc)
        return None, None


def _compiled_contender(torch: Any, compiled: Any, host: tuple[np.ndarray, ...], s: np.float32,
                        expected: np.ndarray) -> Contender:
    ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in host)
    holder: list[Any] = []

    def run_compiled() -> None:
        holder[:] = [compiled(ta, tb, tc, float(s))]

    contender = _contender(run_compiled, lambda: holder[0].cpu().numpy(), expected, "torch.compile")
    torch.cuda.empty_cache()
    return contender


def measure(sizes: tuple[int, ...] = SIZES) -> FuserVsCompile:
    """Check, then time, the three implementations at each size (GPU only)."""
    torch, compiled = _torch_compiled()
    fused = fuse(lambda a, b, c, s: (a + b) * c / s, scalars=("s",))
    s = np.float32(1.5)
    record = FuserVsCompile(expression="(a + b) * c / s")
    for n in sizes:
        host = tuple(random_inputs(n))
        expected = reference(*host, s)
        da, db, dc = (cuda.to_device(x) for x in host)
        out_fuser, out_hand = (poison(cuda.device_array(n, np.float32)) for _ in range(2))
        blocks = blocks_for(n)
        contenders = {
            "fuser": _contender(lambda: fused[blocks, BLOCK_SIZE](da, db, dc, s, out_fuser),
                                out_fuser.copy_to_host, expected, "fuser"),
            "hand-written": _contender(lambda: fused_kernel[blocks, BLOCK_SIZE](da, db, dc, s, out_hand),
                                       out_hand.copy_to_host, expected, "hand-written"),
        }
        same = bool(np.array_equal(out_fuser.copy_to_host(), out_hand.copy_to_host()))
        if compiled is not None:
            contenders["torch.compile"] = _compiled_contender(torch, compiled, host, s, expected)
        record.rows.append(FuserRow(n=n, bytes_moved=16 * n, contenders=contenders, fuser_equals_hand_written=same))
    return record


def _run(args: argparse.Namespace) -> FuserVsCompile | int:
    print(banner())
    if is_simulator():
        print("no GPU: nothing to time; notebook 06 reads the committed result")
        return 0
    record = measure()
    print(summary(record))
    return record


COMMANDS = [Command("", "the tiny fuser, the hand-written fused kernel and torch.compile", _run)]
