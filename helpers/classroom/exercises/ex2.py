"""Exercise 2: the elementwise tail of a layer norm, `(x - mean) * inv_std * gamma + beta`."""

from __future__ import annotations


import numpy as np

from ..exercise import Alternative, Exercise, Expected, Inputs, alt, in_float64, scalar, signed


def _draw_2(n: int, rng: np.random.Generator) -> Inputs:
    return {
        "x": (rng.normal(0.3, 2.0, n)).astype(np.float32),
        "mean": scalar(rng, -0.5, 0.5),
        "inv_std": scalar(rng, 0.4, 1.5),
        "gamma": rng.uniform(0.5, 1.5, n).astype(np.float32) * rng.choice([-1, 1], n).astype(np.float32),
        "beta": signed(rng, n, 0.5),
    }


def _expect_2(v: Inputs) -> Expected:
    x, m, s, g, b = in_float64(v, ("x", "mean", "inv_std", "gamma", "beta"))
    scale = (np.abs(x) + abs(m)) * s * np.abs(g) + np.abs(b)
    return {"out": ((x - m) * s * g + b, scale)}


EXERCISE = Exercise(
    number=2,
    title="the tail of a layer norm",
    unfused="normalize_unfused",
    function="normalize_fused",
    args=("x", "mean", "inv_std", "gamma", "beta", "out"),
    draw=_draw_2,
    expect=_expect_2,
    trips=2,
    bytes_per_element=16,
    budget_hint="All four operations belong in one kernel: read x, gamma and beta once and write "
    "out once; mean and inv_std are scalars and cost no trip.",
    alternatives=(
        Alternative(
            alt(lambda v: ((v["x"] - v["mean"]) * v["inv_std"] + v["beta"]) * v["gamma"]),
            "you added beta before multiplying by gamma: the order is subtract the mean, "
            "multiply by inv_std, multiply by gamma, then add beta",
        ),
        Alternative(
            alt(lambda v: (v["x"] - v["mean"] * v["inv_std"]) * v["gamma"] + v["beta"]),
            "your result matches (x - mean * inv_std) * gamma + beta: multiplication binds tighter "
            "than subtraction, so write `(x[i] - mean) * inv_std`",
        ),
        Alternative(
            alt(lambda v: (v["x"] - v["mean"]) * v["inv_std"] * v["gamma"][0] + v["beta"][0]),
            "gamma and beta hold one value per element: read gamma[i] and beta[i], not gamma[0] and "
            "beta[0] (a freshly initialised layer, gamma all ones and beta all zeros, would hide this)",
        ),
    ),
)
