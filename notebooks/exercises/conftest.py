"""Collect only the solution notebooks here: the student stubs raise NotImplementedError
by design, the nbgrader-format sources duplicate the solutions, and the known-wrong
solutions are graded by tests/test_exercises.py, not collected."""

from pathlib import Path

_HERE = Path(__file__).parent

collect_ignore = ["source", "wrong", "unusual"] + sorted(p.name for p in _HERE.glob("*.ipynb"))
