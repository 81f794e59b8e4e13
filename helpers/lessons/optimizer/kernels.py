"""One AdamW step, as notebook 14 writes it: eight library-style launches, or one fused kernel.

The update (decoupled weight decay, as ``torch.optim.AdamW`` does it), for step ``t``::

    p <- p * (1 - lr * weight_decay)
    m <- beta1 * m + (1 - beta1) * g
    v <- beta2 * v + (1 - beta2) * g * g
    p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

The bias corrections depend only on ``t``, so the host computes them once per step
(:class:`AdamW`) and passes them in as scalars.  Notebook 14's cells are the
kernels' source, copied here between the export markers by ``scripts/export_kernels.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numba import cuda

from helpers.checks import random_inputs
from helpers.ledger import Ledger
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.validate import check_elementwise, check_no_aliasing, require_scalar, require_whole


@dataclass(frozen=True)
class AdamW:
    """AdamW's settings (torch's defaults, but for the learning rate)."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 1e-2

    def __post_init__(self) -> None:
        for name in ("lr", "beta1", "beta2", "eps", "weight_decay"):
            require_scalar(name, getattr(self, name))  # a number, and finite: NaN or inf would spread to every parameter
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        for name in ("eps", "weight_decay"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")

    def scalars(self, step: int) -> tuple[Any, ...]:
        """The fused kernel's scalar arguments for step ``step`` (1, 2, ...), as float32.

        ``1 - beta`` is computed here in double precision, before rounding to float32: in
        float32, ``1 - float32(0.999)`` is off by 1.3e-5 relative, which would show in ``v``.
        """
        if isinstance(step, (int, np.integer)) and not isinstance(step, bool) and step < 1:
            raise ValueError(f"steps count from 1, got {step}")
        step = require_whole("step", step)
        decay = 1 - self.lr * self.weight_decay
        step_size = self.lr / (1 - self.beta1**step)
        bias2_sqrt = math.sqrt(1 - self.beta2**step)
        values = (decay, 1 - self.beta1, self.beta2, 1 - self.beta2, self.eps, step_size, bias2_sqrt)
        return tuple(np.float32(x) for x in values)


def reference(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, opt: AdamW, step: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step in float64 (NumPy): new (p, m, v)."""
    opt.scalars(step)  # the same checks of ``step`` as the kernels get
    p, g, m, v = (np.asarray(a, dtype=np.float64) for a in (p, g, m, v))
    m = opt.beta1 * m + (1 - opt.beta1) * g
    v = opt.beta2 * v + (1 - opt.beta2) * g * g
    p = p * (1 - opt.lr * opt.weight_decay)
    p = p - opt.lr / (1 - opt.beta1**step) * m / (np.sqrt(v) / math.sqrt(1 - opt.beta2**step) + opt.eps)
    return p, m, v


def _require_opt(opt: Any) -> None:
    if not isinstance(opt, AdamW):
        raise TypeError(f"`opt` must be an AdamW (e.g. `AdamW(lr=1e-3)`), got {type(opt).__name__}")


def _require_distinct(**written: Any) -> None:
    """The arrays a step updates in place must be different arrays (m and v one buffer would mix them)."""
    names = list(written)
    for i, first in enumerate(names):
        check_no_aliasing({first: written[first]}, {other: written[other] for other in names[i + 1:]})


_last_lists: list[tuple[Any, ...]] = [()]
"""The tensors of the last checked call (held, so that no other array can take their place)."""


def _require_tensor_lists(params: Sequence[Any], grads: Sequence[Any], ms: Sequence[Any], vs: Sequence[Any]) -> None:
    """Each tensor's four arrays checked as :func:`run_fused` checks them, once for the same tensors.

    An optimizer passes the same tensors at every step; checking them again would put
    hundreds of host-side checks in front of each step's launches.
    """
    tensors = tuple(zip(params, grads, ms, vs))
    last = _last_lists[0]
    if len(last) == len(tensors) and all(a is b for x, y in zip(last, tensors) for a, b in zip(x, y)):
        return
    for t, (p, g, m, v) in enumerate(tensors):
        check_elementwise({f"params[{t}]": p, f"grads[{t}]": g, f"ms[{t}]": m, f"vs[{t}]": v})
        _require_distinct(**{f"params[{t}]": p, f"ms[{t}]": m, f"vs[{t}]": v})
    _last_lists[0] = tensors


# --- unfused: the elementwise launches a library without fusion makes ---------------


# >>> exported from notebooks/14_a_fused_optimizer_step.ipynb (the cell defining scale_inplace_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def scale_inplace_kernel(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a


@cuda.jit
def lerp_inplace_kernel(x, y, w):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] + w * (y[i] - x[i])


@cuda.jit
def add_square_inplace_kernel(x, y, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] + a * y[i] * y[i]


@cuda.jit
def sqrt_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.sqrt(x[i])


@cuda.jit
def divide_inplace_kernel(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] / a


@cuda.jit
def add_scalar_inplace_kernel(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] + a


@cuda.jit
def addcdiv_inplace_kernel(x, y, z, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] + a * y[i] / z[i]
# <<< end of the export from notebooks/14_a_fused_optimizer_step.ipynb


def run_unfused(p: Any, g: Any, m: Any, v: Any, denom: Any, opt: AdamW, step: int) -> None:
    """Eight launches, torch's single-tensor AdamW written out; ``denom`` is a scratch array."""
    _require_opt(opt)
    n = check_elementwise({"p": p, "g": g, "m": m, "v": v, "denom": denom}, outputs=("denom",))
    _require_distinct(p=p, m=m, v=v)
    decay, w1, beta2, w2, eps, step_size, bias2_sqrt = opt.scalars(step)
    blocks = blocks_for(n)
    scale_inplace_kernel[blocks, BLOCK_SIZE](p, decay)  # weight decay
    lerp_inplace_kernel[blocks, BLOCK_SIZE](m, g, w1)  # first moment
    scale_inplace_kernel[blocks, BLOCK_SIZE](v, beta2)  # second moment, in two steps
    add_square_inplace_kernel[blocks, BLOCK_SIZE](v, g, w2)
    sqrt_kernel[blocks, BLOCK_SIZE](v, denom)  # the denominator, in three
    divide_inplace_kernel[blocks, BLOCK_SIZE](denom, bias2_sqrt)
    add_scalar_inplace_kernel[blocks, BLOCK_SIZE](denom, eps)
    addcdiv_inplace_kernel[blocks, BLOCK_SIZE](p, m, denom, -step_size)  # the update


# --- fused: one kernel --------------------------------------------------------------


# >>> exported from notebooks/14_a_fused_optimizer_step.ipynb (the cell defining adamw_kernel);
# >>> edit the notebook, then run python scripts/export_kernels.py
@cuda.jit
def adamw_kernel(p, g, m, v, decay, w1, beta2, w2, eps, step_size, bias2_sqrt):
    i = cuda.grid(1)
    if i < p.size:
        grad = g[i]
        m_new = m[i] + w1 * (grad - m[i])  # w1 = 1 - beta1, w2 = 1 - beta2
        v_new = beta2 * v[i] + w2 * grad * grad
        m[i] = m_new
        v[i] = v_new
        p[i] = p[i] * decay - step_size * m_new / (math.sqrt(v_new) / bias2_sqrt + eps)
# <<< end of the export from notebooks/14_a_fused_optimizer_step.ipynb


def run_fused(p: Any, g: Any, m: Any, v: Any, opt: AdamW, step: int) -> None:
    """One launch: p, g, m, v read once; p, m, v written once."""
    _require_opt(opt)
    n = check_elementwise({"p": p, "g": g, "m": m, "v": v})
    _require_distinct(p=p, m=m, v=v)
    adamw_kernel[blocks_for(n), BLOCK_SIZE](p, g, m, v, *opt.scalars(step))


def run_fused_list(params: Sequence[Any], grads: Sequence[Any], ms: Sequence[Any], vs: Sequence[Any],
                   opt: AdamW, step: int) -> None:
    """The fused kernel once per tensor: one launch each."""
    lists = {"params": params, "grads": grads, "ms": ms, "vs": vs}
    for name, items in lists.items():
        if not isinstance(items, (list, tuple)):
            raise TypeError(f"`{name}` must be a list of device arrays (one per tensor), got {type(items).__name__}")
    if not len(params) == len(grads) == len(ms) == len(vs):
        raise ValueError("params, grads, ms and vs must be lists of one length")
    _require_opt(opt)
    scalars = opt.scalars(step)
    _require_tensor_lists(params, grads, ms, vs)
    for p, g, m, v in zip(params, grads, ms, vs):
        adamw_kernel[blocks_for(p.size), BLOCK_SIZE](p, g, m, v, *scalars)


def mixed_sizes(count: int = 200, total: int = 2**26, seed: int = 0, smallest: int = 64) -> list[int]:
    """``count`` tensor sizes spread over three orders of magnitude, summing to about ``total``.

    A model's parameter list looks like this: many small vectors (biases, norms) and
    a few large matrices.  Sizes are drawn log-uniformly and scaled to the total.
    """
    count, total = require_whole("count", count), require_whole("total", total)
    smallest, seed = require_whole("smallest", smallest), require_whole("seed", seed, low=0)
    if total < count * smallest:
        raise ValueError(f"cannot split {total} elements into {count} tensors of at least {smallest}")
    rng = np.random.default_rng(seed)
    weights = np.exp(rng.uniform(0, math.log(4096), count))
    sizes = np.maximum(smallest, (weights / weights.sum() * total).astype(np.int64))
    return [int(s) for s in sizes]


def count_ledgers(n: int = 1000) -> list[Ledger]:
    """Both AdamW versions on one random state of ``n`` elements, each in a ledger."""
    p, g, m, v = (cuda.to_device(a) for a in random_inputs(n, 4))
    denom = cuda.device_array(n, np.float32)
    opt = AdamW()
    with Ledger("unfused") as unfused:
        run_unfused(p, g, m, v, denom, opt, 1)
    with Ledger("fused") as fused:
        run_fused(p, g, m, v, opt, 1)
    return [unfused, fused]
