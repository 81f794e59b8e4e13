"""The teaching guide's nbgrader steps, run as written: docs/teaching.md is the test script.

Every shell block of the guide marked ``<!-- run: tests/test_nbgrader.py -->`` is run
here, in order, in one temporary folder, with bash and the test's Python environment
first on ``PATH`` (what ``source .venv/bin/activate`` does).  Only two paths are
replaced: the course folder (``~/three-kernels-course``) and the folder the students'
files are handed in to (``~/handed-in``), so that nothing lands in a home directory.
The block whose last line starts JupyterLab (the Formgrader) is started as a server on
a free loopback port with a token, and asked for the course's assignments.

The walk-through makes the course (``make course``), hands out all five assignments
(their student versions must be the committed ones), and grades one of them:
exercise 1, handed in by alice (the committed solution) and bob (a known-wrong
kernel).  One exercise is enough to show that the steps work and that each assignment
is scored on its own points; autograding all five for two students would add a
minute of CI for checks that tests/test_exercises.py (every solution passes, every
wrong file fails with its message) and nbval on the solution notebooks already make.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lab_support import free_port, isolated_jupyter_env, new_token, start_lab

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbgrader", reason="nbgrader is a dev dependency: pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "teaching.md"
EXERCISES = ROOT / "notebooks" / "exercises"
SOURCES = sorted((EXERCISES / "source").glob("[0-9]*.ipynb"))
WRONG = EXERCISES / "wrong" / "ex1_wrong_order.py"
KERNEL = "three-kernels-or-one"
GUIDE_COURSE, GUIDE_HANDED_IN = "~/three-kernels-course", "~/handed-in"  # the two paths the test replaces
STUDENTS = {"alice": "right", "bob": "wrong"}

MARK = "<!-- run: tests/test_nbgrader.py"
BLOCK = re.compile(r"^(?P<mark><!-- run: tests/test_nbgrader\.py(?P<server>, the last line starts a server)? -->\n)?"
                   r"```(?P<lang>[a-z]*)\n(?P<body>.*?)^```", re.S | re.M)

COMMAND = re.compile(r"^\s*(nbgrader|make course|jupyter lab)\b", re.M)  # a line of the teacher's steps

_spec = importlib.util.spec_from_file_location("course_script", ROOT / "scripts" / "course.py")
course_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(course_script)


@dataclass
class Block:
    body: str
    server: bool


def guide_blocks(text: str) -> list[Block]:
    """The guide's marked shell blocks, in order."""
    return [Block(m["body"], bool(m["server"])) for m in BLOCK.finditer(text) if m["mark"]]


def _kernel_installed() -> bool:
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL in KernelSpecManager().find_kernel_specs()


def _points(source: Path) -> tuple[float, float]:
    """(automatic, total) points of an exercise, from its nbgrader cell metadata."""
    cells = [c for c in nbformat.read(source, 4).cells if c.metadata.get("nbgrader", {}).get("grade")]
    auto = sum(c.metadata.nbgrader.get("points", 0) for c in cells if c.cell_type == "code")
    return auto, sum(c.metadata.nbgrader.get("points", 0) for c in cells)


# -- the guide as a script ------------------------------------------------------------------------

@dataclass
class Walkthrough:
    course: Path
    env: dict[str, str]
    cwd: Path
    logs: list[str] = field(default_factory=list)
    formgrader: dict[str, Any] = field(default_factory=dict)

    def bash(self, script: str) -> None:
        """Run guide lines in bash from the current folder; keep the folder they end in."""
        state = self.course.parent / "cwd.txt"
        done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{script}\npwd > {shlex.quote(str(state))}"],
                              cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=900)
        self.logs.append(f"$ {script.strip()}\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
        assert done.returncode == 0, f"the guide's commands failed (exit {done.returncode}):\n{self.logs[-1]}"
        self.cwd = Path(state.read_text().strip())

    def server(self, script: str) -> None:
        """Lines before the last run as usual; the last starts JupyterLab, asked for the Formgrader's view."""
        *before, start = [line for line in script.strip().splitlines() if line.strip()]
        if before:
            self.bash("\n".join(before))
        words = shlex.split(start, comments=True)
        assert words[:2] == ["jupyter", "lab"], f"the Formgrader block should start `jupyter lab`, not {start!r}"
        home = self.course.parent / "lab-home"
        env = {**isolated_jupyter_env(home), "PATH": self.env["PATH"], "PYTHONPATH": self.env["PYTHONPATH"]}
        port, token = free_port(), new_token()
        command = [shutil.which(words[0], path=env["PATH"]), *words[1:], "--no-browser", "--ip=127.0.0.1",
                   f"--port={port}", f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0",
                   "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                   ] + (["--allow-root"] if os.geteuid() == 0 else [])
        lab = start_lab(command, port=port, token=token, cwd=self.cwd, env=env, log=home / "jupyter.log")
        try:
            lab.wait_until_serving()
            self.formgrader["page"] = lab.get("/formgrader")[0]
            self.formgrader["assignments"] = lab.api("GET", "/formgrader/api/assignments")
        finally:
            lab.stop()


def _hand_in(walk: Walkthrough, inbox: Path) -> None:
    """What alice and bob hand in for exercise 1: the committed solution, and a known-wrong kernel."""
    name = SOURCES[0].name
    released = walk.course / "release" / SOURCES[0].stem / name
    (inbox / "alice").mkdir(parents=True)
    (inbox / "bob").mkdir(parents=True)
    shutil.copy(EXERCISES / "solutions" / f"{SOURCES[0].stem}__SOLUTION.ipynb", inbox / "alice" / name)
    nbformat.write(_wrong_submission(released), inbox / "bob" / name)


def _wrong_submission(student: Path) -> Any:
    """Exercise 1's student notebook with a known-wrong kernel (the ReLU before the addition) filled in."""
    notebook = nbformat.read(student, 4)
    body = WRONG.read_text().split("EXPECTED", 1)[1].split("\n", 1)[1]  # the kernel and its launcher
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ex1-kernel")
    cell.source = body.strip()
    notebook.cells.insert(notebook.cells.index(cell), nbformat.v4.new_code_cell("from helpers.sizes import BLOCK_SIZE, blocks_for"))
    return notebook


@pytest.fixture(scope="module")
def walk(tmp_path_factory) -> Walkthrough:
    """The guide's marked blocks, run in order in a temporary folder."""
    if not _kernel_installed():
        pytest.skip(f"the Jupyter kernel {KERNEL!r} is not installed (`make setup` installs it)")
    blocks = guide_blocks(GUIDE.read_text())
    assert blocks and GUIDE_COURSE in blocks[0].body, f"the guide's first marked block should make {GUIDE_COURSE}"
    base = tmp_path_factory.mktemp("teaching")
    inbox = base / "handed-in"
    env = {**isolated_jupyter_env(base / "home"), "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # the activated environment
    walk = Walkthrough(course=base / "three-kernels-course", env=env, cwd=ROOT)
    for block in blocks:
        script = block.body.replace(GUIDE_COURSE, str(walk.course)).replace(GUIDE_HANDED_IN, str(inbox))
        if GUIDE_HANDED_IN in block.body:
            _hand_in(walk, inbox)
        walk.server(script) if block.server else walk.bash(script)
    return walk


# -- the guide's text ------------------------------------------------------------------------------

def test_every_command_in_the_nbgrader_steps_is_run_by_this_test() -> None:
    text = GUIDE.read_text()
    blocks = list(BLOCK.finditer(text))
    unrun = [m["body"] for m in blocks if not m["mark"] and COMMAND.search(m["body"])]
    assert not unrun, f"shell blocks of docs/teaching.md that this test does not run (mark them `{MARK} -->`):\n{unrun}"
    commands = "\n".join(b.body for b in guide_blocks(text))
    for step in ["make course", "generate_assignment", "autograde", "generate_feedback", "nbgrader export"]:
        assert step in commands, f"the guide's tested steps have no `{step}`"
    assert sum(b.server for b in guide_blocks(text)) == 1, "one marked block should start JupyterLab for the Formgrader"
    for source in SOURCES:  # one assignment per exercise, each handed out
        assert f"nbgrader generate_assignment {source.stem}" in commands, source.stem


def test_the_guide_parser_finds_a_marked_block_and_ignores_an_unmarked_one() -> None:
    text = "a\n\n<!-- run: tests/test_nbgrader.py -->\n```bash\nnbgrader export\n```\n\n```\nnbgrader formgrade x\n```\n"
    assert [b.body for b in guide_blocks(text)] == ["nbgrader export\n"]


# -- make course -----------------------------------------------------------------------------------

def test_make_course_refuses_a_folder_inside_the_repository_that_git_would_commit(capsys) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    inside = ROOT / "notebooks" / "a-course-here"
    assert course_script.main([str(inside)]) == 1
    assert "git does not ignore it" in capsys.readouterr().err
    assert not inside.exists()
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "course/gradebook.db"])
    assert ignored.returncode == 0, "course/ (the one course folder allowed inside the repository) is not git-ignored"


def test_make_course_keeps_a_source_the_teacher_edited(tmp_path, capsys) -> None:
    assert course_script.main([str(tmp_path)]) == 0
    edited = tmp_path / "source" / SOURCES[0].stem / SOURCES[0].name
    edited.write_text(edited.read_text().replace("saxpy", "SAXPY"))
    assert course_script.main([str(tmp_path)]) == 1
    assert str(edited) in capsys.readouterr().err and "SAXPY" in edited.read_text()
    assert course_script.main([str(tmp_path), "--force"]) == 0
    assert edited.read_bytes() == SOURCES[0].read_bytes()


# -- what the walk-through produced ----------------------------------------------------------------

def test_the_course_has_one_assignment_per_exercise_and_the_tested_timeout(walk) -> None:
    from nbgrader.preprocessors import Execute
    from traitlets.config.loader import PyFileConfigLoader

    for source in SOURCES:
        assert (walk.course / "source" / source.stem / source.name).read_bytes() == source.read_bytes()
    config = PyFileConfigLoader("nbgrader_config.py", path=str(walk.course)).load_config()
    execute = Execute(config=config)
    assert (execute.timeout, execute.kernel_name) == (600, KERNEL)


def test_generate_assignment_gives_the_committed_student_notebooks(walk) -> None:
    for source in SOURCES:
        released = walk.course / "release" / source.stem / source.name
        theirs, ours = nbformat.read(released, 4), nbformat.read(EXERCISES / source.name, 4)
        assert [(c.cell_type, c.source) for c in theirs.cells] == [(c.cell_type, c.source) for c in ours.cells], (
            f"{source.name}: nbgrader's student version differs from the committed one; run `make release-exercises`")


def test_autograde_gives_the_solution_full_marks_and_the_wrong_kernel_less(walk) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{walk.course / 'gradebook.db'}") as gradebook:
        scores = {student: {g.name: (g.auto_score, g.max_score)
                            for nb in gradebook.find_submission(SOURCES[0].stem, student).notebooks
                            for g in nb.grades if g.cell_type == "code"} for student in STUDENTS}
    assert scores["alice"] and all(score == most for score, most in scores["alice"].values()), scores["alice"]
    assert scores["bob"]["ex1-check"][0] == 0, scores["bob"]


def test_feedback_is_a_page_per_student_with_the_checks_message(walk) -> None:
    name = SOURCES[0].stem
    pages = {s: walk.course / "feedback" / s / name / f"{name}.html" for s in STUDENTS}
    assert all(p.exists() for p in pages.values()), [str(p) for p in pages.values() if not p.exists()]
    expected = re.search(r'EXPECTED = r?"(.*)"', WRONG.read_text())[1]
    assert re.search(expected, pages["bob"].read_text()), "bob's feedback lacks the check's message"


def test_export_scores_each_assignment_on_its_own_points(walk) -> None:
    with open(walk.course / "grades.csv", newline="") as table:
        rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(table)}
    for source in SOURCES:  # every assignment, each out of its own points (not the sum of all five)
        for student in STUDENTS:
            assert float(rows[source.stem, student]["max_score"]) == _points(source)[1], (source.stem, student)
    auto, _ = _points(SOURCES[0])
    alice, bob = (float(rows[SOURCES[0].stem, s]["score"]) for s in STUDENTS)
    assert alice == auto > bob, (alice, bob, auto)  # the written answer waits for the Formgrader


def test_the_formgrader_runs_in_jupyterlab_started_in_the_course_folder(walk) -> None:
    assert walk.formgrader["page"] in (200, 302), walk.formgrader  # /formgrader redirects to its first view
    listed = {a["name"]: a for a in walk.formgrader["assignments"]}
    assert sorted(listed) == [s.stem for s in SOURCES]
    assert listed[SOURCES[0].stem]["num_submissions"] == len(STUDENTS)
