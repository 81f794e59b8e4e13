"""Lesson 14's AdamW step on one tensor of 2^26 elements and on a list of 200 tensors, measured.

Every Numba step runs three steps from a fresh state and is checked against torch's ``fused=True``
AdamW (float64 NumPy without torch), first at an odd size, before it is timed beside torch's three
AdamW implementations (:func:`helpers.lessons.softmax.measure.measure_sizes`).
"""

from __future__ import annotations

import argparse
import math
from typing import Any, Callable

import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.harness.cli import Command
from helpers.harness.peers import release_memory
from helpers.lessons.softmax.measure import Implementation, gpu_torch, keeper, measure_sizes, plots_command, quick_option
from helpers.lessons.softmax.record import Measured

from . import kernels as optim
from .record import AdamWBench, AdamWRow
from .report import FLAT, PER_TENSOR, UNFUSED, adamw_table, save_plot

ADAMW_SIZE = 2**26
ADAMW_LIST = 200
STEPS = 3  # from a fresh state, before the comparison
TOLERANCE = 1e-4  # of each array's scale


def relative_difference(got: np.ndarray, want: np.ndarray) -> float:
    """Largest difference relative to the array's scale (float32 rounding is about 6e-8)."""
    if np.isnan(got).any():
        return math.inf
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


class Tensors:
    """One case's parameters, gradients and moments on the device: flat buffers, each tensor a view of them."""

    def __init__(self, sizes: list[int], p0: np.ndarray, g0: np.ndarray) -> None:
        self.sizes, self.p0, self.g0 = sizes, p0, g0
        self.offsets = np.r_[0, np.cumsum(sizes)]
        self.p, self.g = cuda.to_device(p0), cuda.to_device(g0)
        self.m, self.v = cuda.device_array(p0.size, np.float32), cuda.device_array(p0.size, np.float32)
        self.denom = cuda.device_array(max(sizes), np.float32)
        self.views = [[a[self.offsets[i]:self.offsets[i + 1]] for i in range(len(sizes))]
                      for a in (self.p, self.g, self.m, self.v)]  # [params, grads, ms, vs]

    def reset(self) -> None:
        self.p.copy_to_device(self.p0)
        self.m.copy_to_device(np.zeros(self.p0.size, np.float32))
        self.v.copy_to_device(np.zeros(self.p0.size, np.float32))

    def state(self) -> tuple[np.ndarray, ...]:
        return self.p.copy_to_host(), self.m.copy_to_host(), self.v.copy_to_host()


def numba_steps(t: Tensors, opt: optim.AdamW) -> list[tuple[str, Callable[[int], None]]]:
    """The Numba steps: fused once per tensor, fused over the flat buffer (for a list), unfused."""
    def unfused(step: int) -> None:
        for p, g, m, v in zip(*t.views):
            optim.run_unfused(p, g, m, v, t.denom[: p.size], opt, step)

    steps = [(PER_TENSOR, lambda step: optim.run_fused_list(*t.views, opt, step)), (UNFUSED, unfused)]
    if len(t.sizes) > 1:  # one launch over the buffer the tensors are views of
        steps.insert(1, (FLAT, lambda step: optim.run_fused(t.p, t.g, t.m, t.v, opt, step)))
    return steps


def torch_params(torch: Any, t: Tensors) -> list[Any]:
    """torch copies of the fresh parameters, their gradients set."""
    params = [torch.nn.Parameter(torch.as_tensor(p, device="cuda").clone()) for p in t.views[0]]
    for param, g in zip(params, t.views[1]):
        param.grad = torch.as_tensor(g, device="cuda").clone()
    return params


def torch_adamw(torch: Any, params: list[Any], opt: optim.AdamW, **kind: bool) -> Any:
    """torch's AdamW with ``opt``'s settings (``fused=True``, ``foreach=False``, ...)."""
    return torch.optim.AdamW(params, lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=opt.eps,
                             weight_decay=opt.weight_decay, **kind)


def reference_state(torch: Any, params: list[Any], t: Tensors, opt: optim.AdamW) -> tuple[np.ndarray, ...]:
    """p, m and v after :data:`STEPS` steps of torch's fused AdamW, or of float64 NumPy without torch."""
    if torch is None:
        p, m, v = t.p0, np.zeros(t.p0.size), np.zeros(t.p0.size)
        for step in range(1, STEPS + 1):
            p, m, v = optim.reference(p, t.g0, m, v, opt, step)
        return p, m, v
    ref = torch_adamw(torch, params, opt, fused=True)
    for _ in range(STEPS):
        ref.step()
    return tuple(np.concatenate([x.detach().cpu().numpy() for x in xs])
                 for xs in (params, [ref.state[x]["exp_avg"] for x in params], [ref.state[x]["exp_avg_sq"] for x in params]))


def numba_implementations(t: Tensors, opt: optim.AdamW, want: tuple[np.ndarray, ...]) -> list[Implementation]:
    """Each Numba step, checked after :data:`STEPS` steps from a fresh state, timed as step 1."""
    def checked(step_fn: Callable[[int], None]) -> Callable[[], float]:
        def check() -> float:
            t.reset()
            for step in range(1, STEPS + 1):
                step_fn(step)
            return max(relative_difference(a, b) for a, b in zip(t.state(), want))
        return check

    return [Implementation(name, lambda fn=fn: fn(1), checked(fn), TOLERANCE) for name, fn in numba_steps(t, opt)]


def torch_implementations(torch: Any, params: list[Any], opt: optim.AdamW) -> list[Implementation]:
    """torch's AdamW for-loop, foreach and fused steps (the reference: not compared; the check takes the first step)."""
    found = []
    for label, kwargs in (("torch AdamW foreach=False", {"foreach": False}), ("torch AdamW foreach=True", {"foreach": True}),
                          ("torch AdamW fused=True", {"fused": True})):
        step = torch_adamw(torch, params, opt, **kwargs).step
        found.append(Implementation(label, step, lambda step=step: step(), math.inf))  # step() returns None
    return found


def bench_adamw(size: int, count: int, repeats: int = 20,
                keep: Callable[[AdamWBench], object] | None = None) -> AdamWBench:
    """AdamW on one tensor and on a list of ``count`` tensors, checked (first at an odd size) then timed."""
    torch = gpu_torch()
    opt = optim.AdamW()
    bench = AdamWBench()
    rng = np.random.default_rng()

    def measure(case: str, sizes_of: Callable[[int], list[int]]) -> None:
        def implementations(n: int) -> list[Implementation]:
            sizes = sizes_of(n)
            t = Tensors(sizes, *(rng.standard_normal(sum(sizes), dtype=np.float32) for _ in range(2)))
            params = [] if torch is None else torch_params(torch, t)
            found = numba_implementations(t, opt, reference_state(torch, params, t, opt))
            return found + ([] if torch is None else torch_implementations(torch, params, opt))

        def done(n: int, measured: list[Measured]) -> None:
            release_memory()
            sizes = sizes_of(n)
            row = AdamWRow(case, len(sizes), sum(sizes), 28 * sum(sizes), measured)
            bench.rows.append(row)
            if keep is not None:
                keep(bench)
            print(f"AdamW, {case}: {row.tensors} tensors, {row.elements} elements, "
                  f"{row.bytes_fused / 1e9:.2f} GB at 28 B/element\n{adamw_table(AdamWBench(rows=[row]))}")

        measure_sizes(implementations, [size], repeats, done)

    measure("one tensor", lambda n: [n])
    measure("list", lambda n: optim.mixed_sizes(count, n))
    return bench


def run_adamw(args: argparse.Namespace) -> AdamWBench | None:
    keep = keeper(args)
    size, count = (1000, 7) if is_simulator() else (ADAMW_SIZE, ADAMW_LIST)
    bench = bench_adamw(size, count, repeats=5 if args.quick else 20, keep=keep)
    return None if keep is None else bench


COMMANDS = [
    Command("adamw", "check, then time, the fused and unfused AdamW steps against torch (reductions_adamw.json)",
            run_adamw, quick_option),
    plots_command("adamw", save_plot),
]
