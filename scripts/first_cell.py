"""Give every notebook the friendly first cell of :mod:`helpers.friendly`.

    python scripts/first_cell.py notebooks/[0-9]*.ipynb notebooks/exercises/*.ipynb ...
    python scripts/first_cell.py --check notebooks/...      # report only, exit 1 if any differ

The first code cell of a notebook is replaced when it is the plain opening the
series uses (``import helpers`` and ``helpers.start()``, comments aside); its outputs
and metadata are kept.  Any other first cell is reported, never overwritten.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helpers.friendly import FIRST_CELL, is_first_cell  # noqa: E402

PLAIN_OPENING = ["import helpers", "helpers.start()"]


def _statements(source: str) -> list[str]:
    """The cell's lines without comments and blank lines."""
    lines = (line.split("#", 1)[0].strip() for line in source.splitlines())
    return [line for line in lines if line]


def update(path: Path, check_only: bool) -> str:
    """Bring one notebook's first code cell up to date; return what happened."""
    notebook = nbformat.read(path, as_version=4)
    cell = next((c for c in notebook.cells if c.cell_type == "code"), None)
    if cell is None:
        return "no code cell"
    if is_first_cell(cell.source):
        return "ok"
    if _statements(cell.source) != PLAIN_OPENING:
        return "first code cell is not the plain `import helpers` / `helpers.start()`: edit it by hand"
    if check_only:
        return "would update"
    cell.source = FIRST_CELL
    nbformat.write(notebook, path)
    return "updated"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="report only; exit 1 unless all are up to date")
    args = parser.parse_args(argv)
    bad = 0
    for path in args.notebooks:
        outcome = update(path, args.check)
        bad += outcome not in ("ok", "updated")
        print(f"{path}: {outcome}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
