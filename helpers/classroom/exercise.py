"""What an exercise is, as data: its function, inputs, expected values, trip budget and known mistakes.

Each exercise lives in its own module under :mod:`helpers.classroom.exercises`; the
grading engine (:mod:`helpers.classroom.grading`) runs any of them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
"""The two lines the release script writes where a solution was (``CODE_STUB`` in
scripts/release_exercises.py): how the grader recognises an exercise not yet done."""

Inputs = dict[str, Any]
Expected = dict[str, tuple[np.ndarray, np.ndarray]]  # output name -> (values, error scale)


@dataclass(frozen=True)
class Alternative:
    """A known mistake: the outputs it would give, and what to tell the student."""

    outputs: Callable[[Inputs], dict[str, np.ndarray]]
    message: str


@dataclass(frozen=True)
class Exercise:
    """Everything a check needs to grade one exercise."""

    number: int
    function: str  # the student's function, as the notebook names it
    args: tuple[str, ...]  # its arguments, in order
    draw: Callable[[int, np.random.Generator], Inputs]
    expect: Callable[[Inputs], Expected]
    trips: int  # budget: trips to the n-element arrays
    bytes_per_element: float  # budget: bytes moved per element (float32)
    budget_hint: str  # how to meet the budget, in a sentence
    outputs: tuple[str, ...] = ("out",)  # fresh arrays the function must fill (poisoned)
    in_place: tuple[str, ...] = ()  # arrays the function must update in place
    alternatives: tuple[Alternative, ...] = ()
    diagnose: Callable[[Inputs, str, np.ndarray, np.ndarray, np.ndarray], str | None] | None = None
    title: str = ""  # what the exercise computes, in a few words
    unfused: str = ""  # the name of the given unfused pipeline in the notebook
    # A rule about the launches themselves, once the values and the budget pass: given the launches of the
    # largest size tried (:class:`helpers.classroom.watch.Launched`, their grids as recorded) and that size,
    # what is wrong with them, or None.
    launches: Callable[[Sequence[Any], int], str | None] | None = None

    @property
    def written(self) -> tuple[str, ...]:
        return self.outputs + self.in_place


def signed(rng: np.random.Generator, n: int, spread: float = 1.0) -> np.ndarray:
    """Normal values, about half of them negative, in float32."""
    return rng.normal(0.0, spread, n).astype(np.float32)


def scalar(rng: np.random.Generator, low: float, high: float) -> np.float32:
    """One float32 number drawn uniformly from [low, high)."""
    return np.float32(rng.uniform(low, high))


def f64(x: Any) -> Any:
    """An array as float64 (a number as a Python float), for reference arithmetic."""
    return np.asarray(x, dtype=np.float64) if isinstance(x, np.ndarray) else float(x)


def in_float64(v: Inputs, names: Sequence[str]) -> list[Any]:
    """The inputs ``names``, in that order, as float64 (see :func:`f64`)."""
    return [f64(v[k]) for k in names]


def alt(fn: Callable[[Inputs], np.ndarray], name: str = "out") -> Callable[[Inputs], dict[str, np.ndarray]]:
    """The outputs of a known mistake that writes one array, computed in float64."""
    return lambda v: {name: fn({k: f64(x) for k, x in v.items()})}
