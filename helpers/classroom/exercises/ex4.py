"""Exercise 4: normalise by the largest magnitude, `x / max(|x|)`: where fusion stops."""

from __future__ import annotations


from math import prod
from typing import Any, Sequence

import numpy as np

from ...sizes import BLOCK_SIZE, blocks_for
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


def _divided_by(v: Inputs, got: np.ndarray, want: np.ndarray, bad: np.ndarray, than: str) -> str:
    """The opening of a message for values divided by some other number than the largest |x|."""
    i = int(bad[0])
    m = float(np.abs(f64(v["x"])).max())
    return (
        f"element {i} of `out` is {got[i]:.7g}, expected {want[i]:.7g}: it was divided by about "
        f"{abs(float(v['x'][i]) / float(got[i])):.6g}, {than} than the largest |x| ({m:.6g}), on "
        f"{bad.size} of {got.size} elements. "
    )


def _diagnose_4(v: Inputs, name: str, got: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str | None:
    g, w = got[bad].astype(np.float64), want[bad]
    if np.all(np.isinf(g)):
        i = int(bad[0])
        return (
            f"element {i} of `out` is {got[i]}, expected {want[i]:.7g}: x was divided by zero on "
            f"{bad.size} of {got.size} elements, so the maximum was still 0 when the division ran. "
            "Does your first pass run before the division, and does every element, the last one "
            "included, take part in it?"
        )
    if not (np.all(np.isfinite(g)) and np.all(np.sign(g) == np.sign(w))):
        return None
    if np.all(np.abs(g) > np.abs(w)):
        return _divided_by(v, got, want, bad, "less") + (
            "Either some element never took part in the maximum (check "
            "the loop and the guard of your first pass), or a block divided by the maximum of its own "
            "elements (or by one block's partial maximum), or before the maximum was complete: the maximum needs every element, and in an "
            "ordinary launch blocks cannot wait for each other, so find it in one launch (or two: per "
            "block, then over the blocks) and divide in the next"
        )
    if np.all(np.abs(g) < np.abs(w)):
        return _divided_by(v, got, want, bad, "more") + (
            "Does your maximum include elements of `partial` that no block wrote? The second stage reduces "
            "every element of `partial`, so give it exactly as many elements as the first pass has blocks "
            "(what is left over holds whatever the memory held before)"
        )
    return None


def _first_pass_in_one_block(launched: Sequence[Any], n: int) -> str | None:
    """The first launch given x, the pass that starts the maximum, run as one block where x needs several.

    Read from the grids as the launches were recorded, so the verdict is the same on every backend.
    """
    blocks = blocks_for(n)
    first = next((launch for launch in launched if any(getattr(a, "shape", None) == (n,) for a in launch.args)),
                 None)
    if blocks < 2 or first is None or prod(first.grid) > 1:
        return None
    return (
        f"your values are right, but your first pass over x, `{first.name}`, ran as 1 block at n = {n} "
        f"(x spans {blocks} blocks of {BLOCK_SIZE} threads): one block runs on one SM and leaves the rest of "
        "the GPU idle, and the exercise asks for this pass shared among many blocks. Launch it with a grid "
        "that grows with n, `min(blocks_for(x.size), MAX_PARTIALS)` blocks (is your MAX_PARTIALS more than "
        "1?), each block storing its own maximum in `partial[cuda.blockIdx.x]`, and let the second launch "
        "reduce `partial` in one block"
    )


EXERCISE = Exercise(
    number=4,
    title="normalise by the maximum",
    unfused="normalize_unfused",
    function="normalize_by_max",
    args=("x", "out"),
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
    launches=_first_pass_in_one_block,
)
