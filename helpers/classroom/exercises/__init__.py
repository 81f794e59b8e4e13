"""The exercises as data, one module each; ``EXERCISES`` maps an exercise's number to it."""

from __future__ import annotations

from ..exercise import Exercise
from . import ex1, ex2, ex3, ex4, ex5

EXERCISES: dict[int, Exercise] = {module.EXERCISE.number: module.EXERCISE for module in (ex1, ex2, ex3, ex4, ex5)}

__all__ = ["EXERCISES"]
