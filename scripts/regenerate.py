"""Bring a generated part of a document up to date, or with ``--check`` only say that it is out of date.

Shared by scripts/import_graph.py (docs/architecture.md) and scripts/readme_figures.py (README.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def regenerate(path: Path, updated: Callable[[str], str], argv: list[str], stale: str) -> int:
    """Write ``updated(text)`` over ``path``; with ``--check`` in ``argv`` write nothing and, where
    the file would change, print ``stale`` and return 1."""
    text = path.read_text()
    new = updated(text)
    if "--check" in argv:
        if new != text:
            print(stale)
            return 1
        return 0
    path.write_text(new)
    return 0
