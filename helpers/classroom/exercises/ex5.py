"""Exercise 5: one AdamW step (``torch.optim.AdamW`` semantics), three arrays updated in place by one kernel.

For every element, with ``t`` the number of this step (1 for the first)::

    param = param - lr * weight_decay * param          # decoupled weight decay
    m     = beta1 * m + (1 - beta1) * grad
    v     = beta2 * v + (1 - beta2) * grad ** 2
    param = param - lr * (m / (1 - beta1 ** t)) / (sqrt(v / (1 - beta2 ** t)) + eps)
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..exercise import Alternative, Exercise, Expected, Inputs, in_float64, scalar, signed

NAMES = ("param", "grad", "m", "v", "lr", "beta1", "beta2", "eps", "weight_decay", "step")


def _draw(n: int, rng: np.random.Generator) -> Inputs:
    return {
        "param": signed(rng, n),
        "grad": signed(rng, n),
        "m": signed(rng, n, 0.1),
        "v": (np.abs(rng.normal(0.0, 0.1, n)) ** 2).astype(np.float32),  # a second moment is never negative
        "lr": scalar(rng, 0.01, 0.05),
        "beta1": scalar(rng, 0.8, 0.95),
        "beta2": scalar(rng, 0.95, 0.999),
        "eps": scalar(rng, 1e-3, 1e-2),  # larger than torch's default, so that where it goes shows
        "weight_decay": scalar(rng, 0.05, 0.2),
        "step": int(rng.integers(1, 11)),  # early steps, where the bias corrections matter most
    }


def adamw(p: Any, g: Any, m: Any, v: Any, lr: float, b1: float, b2: float, eps: float, wd: float, t: int,
          *, correct_m: bool = True, correct_v: bool = True, l2: bool = False, old_moments: bool = False,
          eps_inside: bool = False) -> tuple[Any, Any, Any]:
    """One AdamW step in float64: (param, m, v); the keyword arguments make the known mistakes."""
    if l2:
        g = g + wd * p  # Adam with an L2 penalty: the decay goes through the moments
    new_m = b1 * m + (1 - b1) * g
    new_v = b2 * v + (1 - b2) * g * g
    use_m, use_v = (m, v) if old_moments else (new_m, new_v)
    m_hat = use_m / (1 - b1**t) if correct_m else use_m
    v_hat = use_v / (1 - b2**t) if correct_v else use_v
    denominator = np.sqrt(v_hat + eps) if eps_inside else np.sqrt(v_hat) + eps
    decayed = p if l2 else p - lr * wd * p
    return decayed - lr * m_hat / denominator, new_m, new_v


def _values(v: Inputs) -> list[Any]:
    return in_float64(v, NAMES)


def _expect(v: Inputs) -> Expected:
    p, g, m, vv, lr, b1, b2, eps, wd, t = _values(v)
    new_p, new_m, new_v = adamw(p, g, m, vv, lr, b1, b2, eps, wd, t)
    m_scale = b1 * np.abs(m) + (1 - b1) * np.abs(g)
    v_scale = b2 * vv + (1 - b2) * g * g
    ratio = (m_scale / (1 - b1**t)) / (np.sqrt(new_v / (1 - b2**t)) + eps)
    return {
        "param": (new_p, np.abs(p) + lr * wd * np.abs(p) + lr * ratio),
        "m": (new_m, m_scale),
        "v": (new_v, v_scale),
    }


def _mistake(**how: bool) -> Callable[[Inputs], dict[str, np.ndarray]]:
    def outputs(v: Inputs) -> dict[str, np.ndarray]:
        new_p, new_m, new_v = adamw(*_values(v), **how)
        return {"param": new_p, "m": new_m, "v": new_v}

    return outputs


EXERCISE = Exercise(
    number=5,
    title="an AdamW step",
    unfused="adamw_step_unfused",
    function="adamw_step",
    args=NAMES,
    outputs=(),
    in_place=("param", "m", "v"),
    draw=_draw,
    expect=_expect,
    trips=2,
    bytes_per_element=28,
    budget_hint="One kernel can do the whole step: read param, grad, m and v once each, keep the "
    "decayed parameter and the new moments in registers, and write param, m and v once. The two bias "
    "corrections are numbers: compute them once (on the host, or in the kernel), never as arrays.",
    alternatives=(
        Alternative(
            _mistake(correct_m=False, correct_v=False),
            "your step has no bias correction: divide the new m by (1 - beta1 ** step) and the new v by "
            "(1 - beta2 ** step) before using them (early in training the moments start near zero, and "
            "the corrections undo that)",
        ),
        Alternative(
            _mistake(correct_m=False),
            "the first moment is not bias-corrected: use m / (1 - beta1 ** step) in the update",
        ),
        Alternative(
            _mistake(correct_v=False),
            "the second moment is not bias-corrected: use v / (1 - beta2 ** step) under the square root",
        ),
        Alternative(
            _mistake(l2=True),
            "you added weight decay to the gradient, so it went into m and v: that is Adam with an L2 "
            "penalty. AdamW decouples it: `param -= lr * weight_decay * param`, and the moments see the "
            "raw gradient",
        ),
        Alternative(
            _mistake(old_moments=True),
            "your `param` was updated with m and v from before this step: update the moments first, "
            "then use the new ones in the parameter update",
        ),
        Alternative(
            _mistake(eps_inside=True),
            "eps belongs outside the square root: `sqrt(v_hat) + eps`, not `sqrt(v_hat + eps)`",
        ),
    ),
)
