"""Exercise 3: SGD with momentum and weight decay, two arrays updated in place by one kernel."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..exercise import Alternative, Exercise, Expected, Inputs, in_float64, scalar, signed


def _draw_3(n: int, rng: np.random.Generator) -> Inputs:
    return {
        "param": signed(rng, n),
        "grad": signed(rng, n),
        "velocity": signed(rng, n, 0.5),
        "lr": scalar(rng, 0.05, 0.5),
        "momentum": scalar(rng, 0.5, 0.95),
        "weight_decay": scalar(rng, 0.02, 0.2),
    }


ARGS = ("param", "grad", "velocity", "lr", "momentum", "weight_decay")


def _sgd(p: Any, g: Any, v: Any, lr: float, mu: float, wd: float) -> tuple[Any, Any]:
    velocity = mu * v + (g + wd * p)
    return p - lr * velocity, velocity


def _step(p: Any, lr: float, velocity: Any) -> tuple[Any, Any]:
    """A step with a given new velocity: (new param, new velocity)."""
    return p - lr * velocity, velocity


def _expect_3(v: Inputs) -> Expected:
    p, g, vel, lr, mu, wd = in_float64(v, ARGS)
    new_p, new_v = _sgd(p, g, vel, lr, mu, wd)
    v_scale = np.abs(mu * vel) + np.abs(g) + np.abs(wd * p)
    return {"param": (new_p, np.abs(p) + lr * v_scale), "velocity": (new_v, v_scale)}


def _alt_3(update: Callable[..., tuple[Any, Any]]) -> Callable[[Inputs], dict[str, np.ndarray]]:
    def outputs(v: Inputs) -> dict[str, np.ndarray]:
        p, g, vel, lr, mu, wd = in_float64(v, ARGS)
        new_p, new_v = update(p, g, vel, lr, mu, wd)
        return {"param": new_p, "velocity": new_v}

    return outputs


EXERCISE = Exercise(
    number=3,
    title="SGD with momentum",
    unfused="sgd_momentum_step_unfused",
    function="sgd_momentum_step",
    args=ARGS,
    outputs=(),
    in_place=("param", "velocity"),
    draw=_draw_3,
    expect=_expect_3,
    trips=2,
    bytes_per_element=20,
    budget_hint="One kernel can do the whole step: read param, grad and velocity once, compute the "
    "new velocity and the new param in registers, write both once.",
    alternatives=(
        Alternative(
            _alt_3(lambda p, g, v, lr, mu, wd: (p - lr * v, mu * v + g + wd * p)),
            "your `param` was updated with the velocity from before this step: compute the new "
            "velocity first, then use it in `param - lr * velocity`",
        ),
        Alternative(
            _alt_3(lambda p, g, v, lr, mu, wd: _step(p, lr, mu * v + g + wd * g)),
            "weight decay scales the parameter, not the gradient: add `weight_decay * param[i]` to "
            "the gradient (with param equal to grad, as in a uniform test, you could not tell)",
        ),
        Alternative(
            _alt_3(lambda p, g, v, lr, mu, wd: _step(p, lr, mu * v + g)),
            "your step has no weight decay: the gradient is `grad[i] + weight_decay * param[i]`",
        ),
        Alternative(
            _alt_3(lambda p, g, v, lr, mu, wd: _step(p, -lr, mu * v + g + wd * p)),
            "you moved `param` uphill: subtract `lr * velocity`, do not add it",
        ),
    ),
)
