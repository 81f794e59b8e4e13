"""Exercise 4: normalise by the largest magnitude, `x / max(|x|)`: where fusion stops."""

from __future__ import annotations


import numpy as np

from ..exercise import Alternative, Exercise, Expected, Inputs, alt, f64, signed


def _draw_4(n: int, rng: np.random.Generator) -> Inputs:
    x = signed(rng, n)
    if n > 1:
        # The first element is negative and larger in magnitude than any positive one, so
        # that a maximum of the first block's |x| (or of all but the last) is not max(x):
        # those mistakes are told apart from a forgotten absolute value.
        x[0] = -np.float32(np.abs(x).max() * rng.uniform(1.1, 1.3))
        # The largest magnitude sits in the last element, and is negative: a kernel that
        # divides before the maximum is complete, that takes a maximum per block, or that
        # forgets the absolute value, gets most elements wrong.
        x[-1] = -np.float32(np.abs(x).max() * rng.uniform(1.5, 3.0))
    return {"x": x}


def _expect_4(v: Inputs) -> Expected:
    x = f64(v["x"])
    m = np.abs(x).max()
    return {"out": (x / m, np.abs(x / m))}


def _diagnose_4(v: Inputs, name: str, got: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str | None:
    m = float(np.abs(f64(v["x"])).max())
    g, w = got[bad].astype(np.float64), want[bad]
    if np.all(np.isinf(g)):
        i = int(bad[0])
        return (
            f"element {i} of `out` is {got[i]}, expected {want[i]:.7g}: x was divided by zero on "
            f"{bad.size} of {got.size} elements, so the maximum was still 0 when the division ran. "
            "Does your first pass run before the division, and does every element, the last one "
            "included, take part in it?"
        )
    if np.all(np.isfinite(g)) and np.all(np.sign(g) == np.sign(w)) and np.all(np.abs(g) > np.abs(w)):
        i = int(bad[0])
        return (
            f"element {i} of `out` is {got[i]:.7g}, expected {want[i]:.7g}: it was divided by about "
            f"{abs(float(v['x'][i]) / float(got[i])):.6g}, less than the largest |x| ({m:.6g}), on "
            f"{bad.size} of {got.size} elements. Either some element never took part in the maximum (check "
            "the loop and the guard of your first pass), or a block divided by the maximum of its own "
            "elements (or by one block's partial maximum), or before the maximum was complete: the maximum needs every element, and in an "
            "ordinary launch blocks cannot wait for each other, so find it in one launch (or two: per "
            "block, then over the blocks) and divide in the next"
        )
    return None


EXERCISE = Exercise(
    number=4,
    title="normalise by the maximum",
    unfused="normalize_unfused",
    function="normalize_by_max",
    args=("x", "out"),
    outputs=("out",),
    in_place=(),
    draw=_draw_4,
    expect=_expect_4,
    trips=3,
    bytes_per_element=12,
    budget_hint="Store no array of |x|: keep only running maxima (one number per block), and compute "
    "|x| again wherever you need it.",
    alternatives=(
        Alternative(
            alt(lambda v: v["x"] / np.max(v["x"])),
            "your result matches x / max(x): normalise by the largest magnitude, max(|x|), so that "
            "a large negative value counts (take `abs(x[i])` before the maximum)",
        ),
    ),
    diagnose=_diagnose_4,
)
