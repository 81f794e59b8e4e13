"""Make the student and solution notebooks from the nbgrader-format exercise sources.

    python scripts/release_exercises.py            # write what changed, refuse to clobber edits
    python scripts/release_exercises.py --check    # write nothing; exit 1 if a release is out of date
    python scripts/release_exercises.py --force    # instructors only: replace edited notebooks too (a dated copy is kept)

Each source ``notebooks/exercises/source/NN__topic.ipynb`` holds the solution
between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (and, optionally, hidden
tests between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``), as nbgrader
writes them.  From it this script writes

* the **student** version ``notebooks/exercises/NN__topic.ipynb``: each solution
  region becomes ``# YOUR CODE HERE`` and ``raise NotImplementedError()`` (in
  markdown, ``YOUR ANSWER HERE``), hidden tests are removed, outputs cleared;
* the **solution** ``notebooks/exercises/solutions/NN__topic__SOLUTION.ipynb``: the
  markers removed, the code kept, outputs cleared; its Colab badge opens the solution and its
  links to files beside the exercise climb the extra folder.

It writes only into those two folders.  Every notebook it writes records, in its
metadata, a checksum of its cells' sources (and, for a student version, of its cells'
metadata: tags, hidden inputs, collapsed outputs).  A notebook whose cells no longer
match its checksum was edited after it was generated (a student's work, say), and is
never overwritten without ``--force``; nor is a student notebook that was only
*run* (it holds outputs the student may want to keep).  With ``--force`` such a
notebook is replaced, and the old one is kept beside it, dated
(``01__topic.ipynb.student-2026-12-03T101500``).  A notebook that is already up to date is
not touched, so solutions executed in place keep their outputs.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "notebooks" / "exercises"

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
CODE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
ANSWER_STUB = "YOUR ANSWER HERE"
METADATA_KEY = "exercise_release"


class ReleaseError(Exception):
    """A source notebook is malformed (unbalanced markers) or a path is not allowed."""


# --- transforming cell sources --------------------------------------------------


def _regions(lines: list[str], begin: str, end: str, where: str) -> list[tuple[int, int]]:
    """(begin line, end line) of every marked region; raise on unbalanced markers."""
    found, start = [], None
    for i, line in enumerate(lines):
        text = line.strip()
        if text == begin:
            if start is not None:
                raise ReleaseError(f"{where}: `{begin}` inside another region (line {i + 1})")
            start = i
        elif text == end:
            if start is None:
                raise ReleaseError(f"{where}: `{end}` without `{begin}` (line {i + 1})")
            found.append((start, i))
            start = None
    if start is not None:
        raise ReleaseError(f"{where}: `{begin}` is never closed (line {start + 1})")
    return found


def _replace(lines: list[str], regions: list[tuple[int, int]], stub: Any) -> list[str]:
    out: list[str] = []
    last = 0
    for start, stop in regions:
        out += lines[last:start]
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        out += stub(indent, lines[start + 1 : stop])
        last = stop + 1
    return out + lines[last:]


def student_source(source: str, cell_type: str, where: str = "cell") -> str:
    """The student's version of one cell: solutions stubbed out, hidden tests removed."""
    lines = source.split("\n")
    lines = _replace(lines, _regions(lines, BEGIN_HIDDEN, END_HIDDEN, where), lambda indent, body: [])
    text = CODE_STUB if cell_type == "code" else [ANSWER_STUB]
    stub = lambda indent, body: [indent + line for line in text]  # noqa: E731
    lines = _replace(lines, _regions(lines, BEGIN_SOLUTION, END_SOLUTION, where), stub)
    return "\n".join(lines)


def solution_source(source: str, cell_type: str, where: str = "cell") -> str:
    """The solution's version of one cell: the code kept, the marker lines dropped."""
    lines = source.split("\n")
    for begin, end in ((BEGIN_HIDDEN, END_HIDDEN), (BEGIN_SOLUTION, END_SOLUTION)):
        lines = _replace(lines, _regions(lines, begin, end, where), lambda indent, body: body)
    return "\n".join(lines)


# --- notebooks --------------------------------------------------------------------


def content_hash(notebook: Any) -> str:
    """Checksum of the cells' types and sources (outputs and metadata left out)."""
    cells = [[cell.cell_type, cell.source] for cell in notebook.cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


VOLATILE_METADATA = ("execution",)
"""Cell metadata that running a notebook writes (timings), not the student's choice."""


def metadata_hash(notebook: Any) -> str:
    """Checksum of the cells' metadata (tags, hidden inputs, ...), what running writes left out."""
    cells = [{k: v for k, v in cell.metadata.items() if k not in VOLATILE_METADATA} for cell in notebook.cells]
    return hashlib.sha256(json.dumps(cells, sort_keys=True).encode()).hexdigest()


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_release(source_path: Path, kind: str) -> Any:
    """The student (``kind="student"``) or solution notebook for one source, outputs cleared."""
    source = nbformat.read(source_path, as_version=4)
    notebook = copy.deepcopy(source)
    transform = student_source if kind == "student" else solution_source
    for index, cell in enumerate(notebook.cells):
        cell.source = transform(cell.source, cell.cell_type, f"{source_path.name}, cell {index}")
        if kind == "solution" and cell.cell_type == "markdown":
            cell.source = _one_folder_down(cell.source, source_path)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    notebook.metadata[METADATA_KEY] = {
        "kind": kind,
        "source": source_path.name,
        "source_sha256": _file_hash(source_path),
        "content_sha256": content_hash(notebook),
        "generated_by": "scripts/release_exercises.py",
    }
    if kind == "student":  # a student may hide or tag cells: that is their work too
        notebook.metadata[METADATA_KEY]["metadata_sha256"] = metadata_hash(notebook)
    return notebook


RELATIVE_LINK = re.compile(r"\]\((?!https?:|/|#)([\w./-]+\.(?:ipynb|md|png|py)(?:#[\w-]*)?)\)")
"""A markdown link to a file beside the notebook (``](04_counting_the_trips.ipynb)``, ``](../docs/x.md#part)``)."""


def _badge_targets(source_path: Path) -> tuple[str, str]:
    """The student notebook's path in a Colab link, and the solution's that replaces it."""
    stem = source_path.stem
    return f"/notebooks/exercises/{stem}.ipynb)", f"/notebooks/exercises/solutions/{stem}__SOLUTION.ipynb)"


def _one_folder_down(markdown: str, source_path: Path) -> str:
    """A markdown cell as the solution, one folder below the student's notebook, needs it: its Colab badge opens
    the solution itself, and its links to files beside the exercise climb one folder more."""
    markdown = RELATIVE_LINK.sub(lambda m: f"](../{m.group(1)})", markdown)
    return markdown.replace(*_badge_targets(source_path))


def release_paths(source_path: Path, release_dir: Path) -> dict[str, Path]:
    stem = source_path.stem
    return {
        "student": release_dir / f"{stem}.ipynb",
        "solution": release_dir / "solutions" / f"{stem}__SOLUTION.ipynb",
    }


def edited(path: Path, fresh: Any | None = None) -> str | None:
    """Why an existing release notebook must not be overwritten, or None when it may be.

    ``fresh`` is the notebook that would replace it: a student version released before
    cell metadata was recorded is compared with the fresh one's metadata instead.
    """
    try:
        existing = nbformat.read(path, as_version=4)
    except Exception as error:  # unreadable: someone's file, not ours
        return f"it cannot be read as a notebook ({error})"
    record = existing.metadata.get(METADATA_KEY)
    if not record or "content_sha256" not in record:
        return "it was not written by this script (no release checksum in its metadata)"
    if record["content_sha256"] != content_hash(existing):
        return "its cells were edited after it was generated"
    if record.get("kind") == "student" and _was_run(existing):
        return "it was run after it was generated (its outputs would be lost)"
    if record.get("kind") == "student" and _metadata_changed(existing, record, fresh):
        return "its cells' metadata (tags, hidden or collapsed cells) was changed after it was generated"
    return None


def _metadata_changed(existing: Any, record: dict[str, Any], fresh: Any | None) -> bool:
    recorded = record.get("metadata_sha256")
    if recorded is None and fresh is not None:  # released before the metadata was recorded
        recorded = fresh.metadata[METADATA_KEY].get("metadata_sha256")
    return recorded is not None and recorded != metadata_hash(existing)


def _was_run(notebook: Any) -> bool:
    """True when any code cell holds outputs or an execution count: someone ran the notebook."""
    return any(
        cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
        for cell in notebook.cells
    )


def same_release(path: Path, notebook: Any) -> bool:
    """True when the file at ``path`` already holds these cells from this source."""
    existing = nbformat.read(path, as_version=4)
    mine, theirs = notebook.metadata[METADATA_KEY], existing.metadata.get(METADATA_KEY, {})
    keys = [k for k in ("kind", "source", "source_sha256", "content_sha256", "metadata_sha256") if k in mine]
    return content_hash(existing) == mine["content_sha256"] and all(theirs.get(k) == mine[k] for k in keys)


@dataclass
class Outcome:
    path: Path
    status: str  # "written", "up to date", "refused", "out of date", "missing"
    why: str = ""
    kept: Path | None = None  # where the replaced notebook was kept (``--force`` on an edited one)


def keep_a_copy(path: Path, kind: str) -> Path:
    """Copy ``path`` beside itself under a dated name that no tool takes for a notebook; return it."""
    stamp = datetime.now().strftime("%Y-%m-%dT%H%M%S")
    kept = path.with_name(f"{path.name}.{kind}-{stamp}")
    count = 1
    while kept.exists():
        count += 1
        kept = path.with_name(f"{path.name}.{kind}-{stamp}-{count}")
    shutil.copy2(path, kept)
    return kept


def release(source_dir: Path, release_dir: Path, *, force: bool = False, check: bool = False) -> list[Outcome]:
    """Write (or with ``check``, only compare) every student and solution notebook."""
    source_dir, release_dir = source_dir.resolve(), release_dir.resolve()
    if release_dir == source_dir or source_dir in (release_dir, release_dir / "solutions"):
        raise ReleaseError("the release folder must not be the source folder")
    sources = sorted(source_dir.glob("[0-9]*.ipynb"))
    if not sources:
        raise ReleaseError(f"no exercise sources (NN__topic.ipynb) in {source_dir}")
    outcomes = []
    for source_path in sources:
        for kind, path in release_paths(source_path, release_dir).items():
            notebook = make_release(source_path, kind)
            why = None  # why an existing notebook must not be replaced (kept, dated, under --force)
            if not path.exists():
                if check:
                    outcomes.append(Outcome(path, "missing"))
                    continue
            elif same_release(path, notebook):
                outcomes.append(Outcome(path, "up to date"))
                continue
            elif check:
                outcomes.append(Outcome(path, "out of date", edited(path, notebook) or "its source changed"))
                continue
            elif (why := edited(path, notebook)) and not force:
                outcomes.append(Outcome(path, "refused", why))
                continue
            outcomes.append(_write(notebook, path, release_dir, kind, why))
    return outcomes


def _write(notebook: Any, path: Path, release_dir: Path, kind: str, why: str | None) -> Outcome:
    """Write one release; an edited notebook it replaces (``--force``) is kept first, dated."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.resolve().is_relative_to(release_dir):
        raise ReleaseError(f"refusing to write outside the release folder: {path}")
    kept = keep_a_copy(path, kind) if why else None
    nbformat.write(notebook, path)
    return Outcome(path, "written", why or "", kept)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=EXERCISES / "source", help="folder of nbgrader-format sources")
    parser.add_argument("--release", type=Path, default=EXERCISES, help="folder for the student versions")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 unless everything is up to date")
    parser.add_argument("--force", action="store_true",
                        help="replace notebooks edited since generation, keeping a dated copy of each (instructors)")
    args = parser.parse_args(argv)
    try:
        outcomes = release(args.source, args.release, force=args.force, check=args.check)
    except ReleaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    bad = 0
    for outcome in outcomes:
        shown = outcome.path.relative_to(Path.cwd()) if outcome.path.is_relative_to(Path.cwd()) else outcome.path
        line = f"{outcome.status:>11}  {shown}"
        if outcome.status == "refused":
            line += (f": {outcome.why}; move it away, or pass --force to replace it (the old one is then kept "
                     "beside it, under a dated name)")
        elif outcome.kept is not None:
            line += f": {outcome.why}; the old one is kept as {outcome.kept.name}"
        elif outcome.why:
            line += f": {outcome.why}"
        print(line)
        bad += outcome.status in ("refused", "out of date", "missing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
