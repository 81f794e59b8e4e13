"""Give every notebook the first cell, badge and kernel of :mod:`helpers.friendly`.

    python scripts/first_cell.py notebooks/[0-9]*.ipynb notebooks/exercises/source/*.ipynb
    python scripts/first_cell.py --check notebooks/...      # report only, exit 1 if any differ

For each notebook it brings three things up to date, and nothing else:

* the first code cell becomes :data:`helpers.friendly.FIRST_CELL` when it is the plain
  opening the series uses (``import helpers`` and ``helpers.start()``, comments aside) or
  a first cell this script wrote before (:data:`EARLIER_CELLS`); its outputs and metadata
  are kept, and its source is folded in JupyterLab (``jupyter.source_hidden``).  Any other first cell is
  reported, never overwritten;
* the first markdown cell opens with the Open-in-Colab badge of the notebook (an exercise
  source gets the badge of the student notebook made from it);
* ``metadata.kernelspec`` names the project's kernel (:data:`helpers.friendly.KERNELSPEC`).

The student and solution notebooks are made from the exercise sources by
``scripts/release_exercises.py``: this script refuses them (edit the source, then
``make release-exercises``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from helpers.friendly import FIRST_CELL, IMPORT_OR_EXPLAIN, KERNELSPEC, colab_badge, is_first_cell  # noqa: E402

PLAIN_OPENING = ["import helpers", "helpers.start()"]
BADGE_START = "[![Open in Colab]("

EARLIER_CELLS = (
    # 2026-12: the friendly error only, before the cell installed the project on Colab.
    "# NBVAL_IGNORE_OUTPUT\n" + IMPORT_OR_EXPLAIN,
)
"""First cells this script wrote before: replaced by the current one like the plain opening."""


def _statements(source: str) -> list[str]:
    """The cell's lines without comments and blank lines."""
    lines = (line.split("#", 1)[0].strip() for line in source.splitlines())
    return [line for line in lines if line]


def colab_path(path: Path) -> str:
    """The repository path that the notebook's Colab badge opens (an exercise source: its student notebook)."""
    relative = path.resolve().relative_to(ROOT)
    if relative.parent == Path("notebooks/exercises/source"):
        relative = relative.parent.parent / relative.name
    return relative.as_posix()


def with_badge(markdown: str, badge: str) -> str:
    """``markdown`` opening with ``badge`` on a line of its own (an older badge line replaced)."""
    lines = markdown.split("\n")
    if lines and lines[0].startswith(BADGE_START):
        lines = lines[2:] if len(lines) > 1 and not lines[1].strip() else lines[1:]
    return "\n".join([badge, "", *lines])


def _first_code_cell(notebook) -> str | None:
    """Bring the first code cell up to date in place; None when done, else why not."""
    cell = next((c for c in notebook.cells if c.cell_type == "code"), None)
    if cell is None:
        return "no code cell"
    if not is_first_cell(cell.source):
        known = cell.source.rstrip() in (c.rstrip() for c in EARLIER_CELLS)
        if not known and _statements(cell.source) != PLAIN_OPENING:
            return "first code cell is not the plain `import helpers` / `helpers.start()`: edit it by hand"
        cell.source = FIRST_CELL
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True  # set-up, not lesson: JupyterLab folds it
    return None


def update(path: Path, check_only: bool) -> str:
    """Bring one notebook's first cell, badge and kernelspec up to date; return what happened."""
    notebook = nbformat.read(path, as_version=4)
    if "exercise_release" in notebook.metadata:  # the record scripts/release_exercises.py leaves
        return "made by scripts/release_exercises.py: edit its source in notebooks/exercises/source, then `make release-exercises`"
    before = nbformat.writes(notebook)
    refused = _first_code_cell(notebook)
    if refused:
        return refused
    markdown = next((c for c in notebook.cells if c.cell_type == "markdown"), None)
    if markdown is None:
        return "no markdown cell for the Colab badge"
    markdown.source = with_badge(markdown.source, colab_badge(colab_path(path)))
    notebook.metadata["kernelspec"] = dict(KERNELSPEC)
    if nbformat.writes(notebook) == before:
        return "ok"
    if check_only:
        return "would update"
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
