"""Make an nbgrader course folder for the exercises: one assignment per exercise.

    python scripts/course.py FOLDER [--force]      (or: make course COURSE=FOLDER)

The folder gets, as nbgrader 0.9 expects them (docs/teaching.md says how to use it):

* ``nbgrader_config.py``: the course id, the project's Jupyter kernel, and a cell
  timeout long enough for the simulator (nbgrader's own default is 30 s a cell);
* ``source/NN__topic/NN__topic.ipynb`` for each ``notebooks/exercises/source/NN__topic.ipynb``:
  five assignments, handed out and scored one by one.

The folder holds the gradebook and the students' work, so it must stay out of git:
a folder inside the repository is refused unless git ignores it (``course/`` is in
``.gitignore``).  A file already in the folder that differs from what this script
would write (a source the teacher edited, a config they changed) is never
overwritten: the script names it and stops; ``--force`` replaces it.  Nothing else
in the folder (releases, submissions, the gradebook) is touched.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "notebooks" / "exercises" / "source"
COURSE_ID = "three-kernels-or-one"
KERNEL = "three-kernels-or-one"  # the Jupyter kernel `make setup` registers
CELL_TIMEOUT_S = 600

CONFIG = f'''\
# nbgrader's settings for this course, written by `make course` (scripts/course.py).
# Run every nbgrader command, and `jupyter lab` for the Formgrader, from this folder.
c = get_config()
c.CourseDirectory.course_id = "{COURSE_ID}"
# Execute each submission in the project's kernel (registered by `make setup`).
c.Execute.kernel_name = "{KERNEL}"
# Seconds a cell may run while autograding. nbgrader's default (30 s) is too short for
# the CUDA simulator on a slow or busy machine; the test suite grades with this value.
c.Execute.timeout = {CELL_TIMEOUT_S}
'''


class Refused(Exception):
    """The course folder cannot be made as asked; the message says why and what to do."""


def exercise_sources(sources: Path = SOURCES) -> list[Path]:
    found = sorted(sources.glob("[0-9]*.ipynb"))
    if not found:
        raise Refused(f"no exercise sources in {sources}")
    return found


def planned_files(sources: Path = SOURCES) -> dict[Path, bytes]:
    """What the course folder holds, relative path -> content."""
    files = {Path("nbgrader_config.py"): CONFIG.encode()}
    for source in exercise_sources(sources):
        files[Path("source") / source.stem / source.name] = source.read_bytes()
    return files


def check_outside_git(folder: Path, root: Path = ROOT) -> None:
    """Refuse a folder inside the repository that git would commit."""
    try:
        folder.relative_to(root)
    except ValueError:
        return
    probe = folder / "gradebook.db"
    try:
        done = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", str(probe)], capture_output=True)
    except FileNotFoundError:  # no git: nothing would commit it
        return
    if done.returncode == 1:
        raise Refused(
            f"COURSE={folder} is inside the repository and git does not ignore it: `git add -A` would commit "
            "the gradebook and the students' work. Put the course outside the repository "
            "(e.g. COURSE=~/three-kernels-course), or in course/, which .gitignore lists")


def make_course(folder: Path, force: bool = False, sources: Path = SOURCES) -> list[str]:
    """Write the course folder; returns one line per file (written, unchanged or replaced)."""
    folder = folder.expanduser().resolve()
    check_outside_git(folder)
    if folder.exists() and not folder.is_dir():
        raise Refused(f"COURSE={folder} is a file, not a folder")
    files = planned_files(sources)
    differing = [path for path, content in files.items()
                 if (folder / path).exists() and (folder / path).read_bytes() != content]
    if differing and not force:
        names = "\n  ".join(str(folder / p) for p in differing)
        raise Refused(f"these files differ from what `make course` writes, and are kept:\n  {names}\n"
                      "move them away, or pass --force (make course FORCE=1) to replace them")
    report = []
    for path, content in files.items():
        target = folder / path
        if target.exists() and target.read_bytes() == content:
            report.append(f"unchanged  {path}")
            continue
        state = "replaced " if target.exists() else "written  "
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        report.append(f"{state}  {path}")
    return report


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Make an nbgrader course folder: one assignment per exercise.")
    parser.add_argument("folder", type=Path, help="the course folder, outside the repository (e.g. ~/three-kernels-course)")
    parser.add_argument("--force", action="store_true", help="replace files that differ from the repository's")
    args = parser.parse_args(argv)
    try:
        report = make_course(args.folder, force=args.force)
    except Refused as refusal:
        print(f"make course: {refusal}", file=sys.stderr)
        return 1
    folder = args.folder.expanduser().resolve()
    print(f"course folder {folder}:\n  " + "\n  ".join(report))
    assignments = [p.stem for p in exercise_sources()]
    print(f"assignments: {', '.join(assignments)}\nnext: cd {folder} && nbgrader generate_assignment {assignments[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
