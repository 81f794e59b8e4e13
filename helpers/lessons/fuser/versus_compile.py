"""Notebook 06's comparison: the tiny fuser's kernel, the hand-written fused kernel and torch.compile.

All three compute ``(a + b) * c / s``; each is checked against NumPy, then timed two
ways, so that like is compared with like:

* **GPU time** -- CUDA events with the launch queued behind a short hold kernel
  (:func:`helpers.timing.time_gpu`), so the host's cost of issuing it is hidden;
* **host time per call** -- what issuing one call costs the Python thread
  (:func:`helpers.timing.host_enqueue_us`).

``python -m helpers.lessons.fuser.versus_compile`` writes ``fuser_vs_torch_compile.json``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

from helpers.backend import is_simulator
from helpers.checks import poison, random_inputs
from helpers.device import banner
from helpers.lessons.fuser.fuser import fuse
from helpers.pipeline import fused_kernel, reference
from helpers.results import Record, save
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import host_enqueue_us, time_gpu

SIZES = (2**20, 2**24, 2**28)


@dataclass
class Contender:
    """One implementation at one size: correct or not, GPU time, and host time per call."""

    equals_numpy: bool
    gpu_ms: float
    host_us: float
    max_abs_diff: float = 0.0


@dataclass
class FuserRow:
    n: int
    bytes_moved: int
    contenders: dict[str, Contender]
    fuser_equals_hand_written: bool


@dataclass(kw_only=True)
class FuserVsCompile(Record):
    SCHEMA: ClassVar[str] = "fuser_vs_torch_compile"
    VERSION: ClassVar[int] = 2
    expression: str
    rows: list[FuserRow] = field(default_factory=list)
    timing: str = ("GPU time: CUDA events, launches queued behind a hold kernel (host cost hidden), median of 50; "
                   "host time: perf_counter per call, median of bursts")


def _contender(run: Callable[[], Any], result: Callable[[], np.ndarray], expected: np.ndarray, label: str) -> Contender:
    run()
    got = result()
    timing = time_gpu(run, label=label, repeats=50)
    assert timing is not None
    return Contender(equals_numpy=bool(np.array_equal(got, expected)), gpu_ms=timing.median_ms,
                     host_us=host_enqueue_us(run), max_abs_diff=float(np.max(np.abs(got - expected))))


def measure(sizes: tuple[int, ...] = SIZES) -> FuserVsCompile:
    """Check, then time, the three implementations at each size (GPU only)."""
    from numba import cuda

    try:
        import torch
        compiled = torch.compile(lambda a, b, c, s: (a + b) * c / s, dynamic=False)
    except Exception as exc:  # torch missing or broken: still measure the Numba kernels
        print("torch.compile unavailable:", exc)
        torch = compiled = None
    fused = fuse(lambda a, b, c, s: (a + b) * c / s, scalars=("s",))
    s = np.float32(1.5)
    record = FuserVsCompile(expression="(a + b) * c / s")
    for n in sizes:
        a, b, c = random_inputs(n)
        expected = reference(a, b, c, s)
        da, db, dc = (cuda.to_device(x) for x in (a, b, c))
        out_fuser = poison(cuda.device_array(n, np.float32))
        out_hand = poison(cuda.device_array(n, np.float32))
        blocks = blocks_for(n)
        contenders = {
            "fuser": _contender(lambda: fused[blocks, BLOCK_SIZE](da, db, dc, s, out_fuser),
                                out_fuser.copy_to_host, expected, "fuser"),
            "hand-written": _contender(lambda: fused_kernel[blocks, BLOCK_SIZE](da, db, dc, s, out_hand),
                                       out_hand.copy_to_host, expected, "hand-written"),
        }
        same = bool(np.array_equal(out_fuser.copy_to_host(), out_hand.copy_to_host()))
        if compiled is not None:
            ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
            holder: list[Any] = []

            def run_compiled() -> None:
                holder[:] = [compiled(ta, tb, tc, float(s))]

            contenders["torch.compile"] = _contender(run_compiled, lambda: holder[0].cpu().numpy(), expected,
                                                     "torch.compile")
            torch.cuda.empty_cache()
        record.rows.append(FuserRow(n=n, bytes_moved=16 * n, contenders=contenders, fuser_equals_hand_written=same))
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.lessons.fuser.versus_compile",
                                     description="the tiny fuser, the hand-written fused kernel and torch.compile")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/<gpu>)")
    args = parser.parse_args(argv)
    print(banner())
    if is_simulator():
        print("no GPU: nothing to time; notebook 06 reads the committed result")
        return 0
    record = measure()
    for row in record.rows:
        for name, c in row.contenders.items():
            print(f"n = {row.n:>10,}  {name:14s} GPU {c.gpu_ms * 1e3:9.1f} µs  host {c.host_us:6.1f} µs/call"
                  f"  equal to NumPy: {c.equals_numpy} (max diff {c.max_abs_diff:.3g})")
    print("wrote", save(record, folder=args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
