"""Exercise 1: SAXPY then ReLU, `out = max(a * x + y, 0)`, in one kernel."""

from __future__ import annotations


import numpy as np

from ..exercise import Alternative, Exercise, Expected, Inputs, alt, in_float64, signed


def _draw_1(n: int, rng: np.random.Generator) -> Inputs:
    a = np.float32(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0))
    return {"a": a, "x": signed(rng, n), "y": signed(rng, n)}


def _expect_1(v: Inputs) -> Expected:
    a, x, y = in_float64(v, ("a", "x", "y"))
    return {"out": (np.maximum(a * x + y, 0.0), np.abs(a * x) + np.abs(y))}


EXERCISE = Exercise(
    number=1,
    title="SAXPY then ReLU",
    unfused="saxpy_relu_unfused",
    function="saxpy_relu",
    args=("a", "x", "y", "out"),
    draw=_draw_1,
    expect=_expect_1,
    trips=2,
    bytes_per_element=12,
    budget_hint="Do the scaling, the addition and the ReLU in one kernel: read x and y once, "
    "keep a * x and a * x + y in registers, write out once.",
    alternatives=(
        Alternative(
            alt(lambda v: v["a"] * v["x"] + v["y"]),
            "your values are right where a * x + y is positive but not where it is negative: "
            "apply the ReLU, `max(a * x[i] + y[i], 0)`",
        ),
        Alternative(
            alt(lambda v: np.maximum(v["a"] * v["x"], 0.0) + v["y"]),
            "you applied the ReLU before adding y (max(a * x, 0) + y): add first, then take "
            "`max(..., 0)` of the sum",
        ),
        Alternative(
            alt(lambda v: np.maximum(v["a"] * v["y"] + v["x"], 0.0)),
            "your result matches max(a * y + x, 0): x and y are swapped (a check with equal x and "
            "y would not have noticed)",
        ),
    ),
)
