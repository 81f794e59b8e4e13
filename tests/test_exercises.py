"""The classroom exercises: every known-wrong solution is rejected with its message,
every solution is accepted, and the student notebooks are clean and in sync."""

from __future__ import annotations

import copy
import importlib.util
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from helpers.checks import CheckFailed
from helpers.classroom import grading, reference
from helpers.friendly import KERNEL_NAME

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "notebooks" / "exercises"
SOURCES = sorted((EXERCISES / "source").glob("[0-9]*.ipynb"))
WRONG = sorted((EXERCISES / "wrong").glob("ex*.py"))
UNUSUAL = sorted((EXERCISES / "unusual").glob("ex*.py"))
SCRIPT = ROOT / "scripts" / "release_exercises.py"

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(EXERCISES / "wrong"))  # the wrong solutions share their right pieces (_parts.py)
import release_exercises  # noqa: E402


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exercise_of(path: Path) -> int:
    return int(re.match(r"ex(\d+)_", path.name).group(1))


# --- known-wrong solutions -----------------------------------------------------------


def test_every_exercise_has_the_required_kinds_of_wrong_solution():
    required = ["stub", "no_guard", "off_by_one", "unfused", "wrong_order", "half", "uniform_only"]
    for number in grading.EXERCISES:
        names = {p.stem.split("_", 1)[1] for p in WRONG if _exercise_of(p) == number}
        missing = [kind for kind in required if kind not in names]
        assert not missing, f"exercise {number} lacks wrong solutions: {missing}"


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_wrong_solution_is_rejected_with_its_message(path):
    module = _load(path, f"wrong_{path.stem}")
    exercise = grading.EXERCISES[_exercise_of(path)]
    with pytest.raises(CheckFailed) as failure:
        grading.grade(exercise, getattr(module, exercise.function))
    assert re.search(module.EXPECTED, str(failure.value), re.S), (
        f"{path.name} was rejected, but with another message:\n{failure.value}"
    )


@pytest.mark.parametrize("path", UNUSUAL, ids=[p.stem for p in UNUSUAL])
def test_a_correct_solution_written_an_unusual_way_passes(path):
    """At this backend's own sizes, with its own engine: on a GPU, the compiled code and sizes past a million."""
    module = _load(path, f"unusual_{path.stem}")
    exercise = grading.EXERCISES[_exercise_of(path)]
    result = grading.grade(exercise, getattr(module, exercise.function))
    assert (result.trips, result.bytes_per_element) == (exercise.trips, exercise.bytes_per_element)


# --- the solutions -----------------------------------------------------------------------


def _solution_module(source: Path, tmp_path: Path):
    """The solution's imports, definitions and constants, as an importable file (so sources can be read)."""
    path = tmp_path / f"solution_{source.stem}.py"
    path.write_text(reference.solution_code(source))
    return _load(path, path.stem)


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_solution_passes_its_check(source, tmp_path, capsys):
    number = int(source.name[:2])
    exercise = grading.EXERCISES[number]
    module = _solution_module(source, tmp_path)
    result = grading.grade(exercise, getattr(module, exercise.function))
    assert result.trips == exercise.trips
    assert result.bytes_per_element == exercise.bytes_per_element
    assert result.sizes == grading.check_sizes()
    assert f"exercise {number} passed" in result.summary()


# Exercise 2 gives its pipeline for a prediction (graded by check_prediction_2), not to be checked.
GRADED_UNFUSED = [p for p in SOURCES if int(p.name[:2]) != 2]


@pytest.mark.parametrize("source", GRADED_UNFUSED, ids=[p.stem for p in GRADED_UNFUSED])
def test_the_given_unfused_pipelines_are_correct_but_fail_the_budget(source, tmp_path):
    """Passed as a student's function (under another name), the given pipeline gets right values and fails the
    budget, with a message that names no budget: the budgets are graded answers."""
    exercise = grading.EXERCISES[int(source.name[:2])]
    given = getattr(_solution_module(source, tmp_path), exercise.unfused)

    def renamed(*args):
        return given(*args)

    renamed.__signature__ = inspect.signature(given)
    with pytest.raises(CheckFailed, match=r"you made \d+ trips to memory in \d+ launches") as failure:
        grading.grade(exercise, renamed)
    trips = int(re.search(r"you made (\d+) trips", str(failure.value)).group(1))
    assert trips > exercise.trips
    assert "more than this computation needs" in str(failure.value)
    assert not re.search(rf"\b{exercise.trips} trips\b|needs {exercise.trips}\b", str(failure.value))


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_the_given_pipeline_itself_is_refused_by_name(source, tmp_path):
    """Checking the given pipeline would print its counts, which exercises 2, 3 and 5 ask the student to predict
    (the refusal names the function to check instead, and no number)."""
    exercise = grading.EXERCISES[int(source.name[:2])]
    given = getattr(_solution_module(source, tmp_path), exercise.unfused)
    with pytest.raises(grading.BadArgument, match=rf"`{exercise.unfused}` is the given pipeline") as refusal:
        grading.grade(exercise, given)
    assert not re.search(r"\d", str(refusal.value))


def test_every_exercise_has_a_source_and_every_source_an_exercise():
    assert sorted(int(p.name[:2]) for p in SOURCES) == sorted(grading.EXERCISES)


# --- student versions ---------------------------------------------------------------------


def test_there_are_at_least_four_exercises_with_students_and_solutions():
    assert len(SOURCES) >= 4
    for source in SOURCES:
        paths = release_exercises.release_paths(source, EXERCISES)
        assert paths["student"].exists() and paths["solution"].exists(), source.name


@pytest.mark.parametrize("kind", ["student", "solution"])
def test_committed_releases_are_in_sync_with_their_sources(kind, tmp_path):
    shutil.copytree(EXERCISES / "source", tmp_path / "source")
    release_exercises.release(tmp_path / "source", tmp_path / "release")
    for source in SOURCES:
        fresh = nbformat.read(release_exercises.release_paths(source, tmp_path / "release")[kind], 4)
        committed = nbformat.read(release_exercises.release_paths(source, EXERCISES)[kind], 4)
        assert [(c.cell_type, c.source) for c in committed.cells] == [(c.cell_type, c.source) for c in fresh.cells], (
            f"{source.name}: the {kind} version is out of date; run `make release-exercises`"
        )
        assert committed.metadata["exercise_release"] == fresh.metadata["exercise_release"]


def test_release_check_mode_agrees():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_student_notebooks_are_clean_and_hold_no_solution():
    for source in SOURCES:
        student = release_exercises.release_paths(source, EXERCISES)["student"]
        text = student.read_text()
        notebook = nbformat.read(student, 4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{student.name} has outputs"
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
        assert "raise NotImplementedError()" in text
        solution = nbformat.read(release_exercises.release_paths(source, EXERCISES)["solution"], 4)
        assert "NotImplementedError" not in "".join(c.source for c in solution.cells)
        assert notebook.metadata["kernelspec"]["name"] == KERNEL_NAME


def test_solution_cells_carry_nbgrader_metadata():
    for source in SOURCES:
        notebook = nbformat.read(source, 4)
        marked = [c for c in notebook.cells if "### BEGIN SOLUTION" in c.source]
        assert marked, source.name
        for cell in marked:
            assert cell.metadata["nbgrader"]["solution"] is True
        graded = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
        checks = [c for c in graded if c.cell_type == "code"]
        assert checks and all("grading.check_" in c.source for c in checks)
        ids = [c.metadata["nbgrader"]["grade_id"] for c in notebook.cells if "nbgrader" in c.metadata]
        assert len(ids) == len(set(ids)), f"{source.name}: grade ids repeat"
        for cell in notebook.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "markdown" and meta.get("solution"):
                # nbgrader refuses a markdown answer that is not also a grade cell with points
                assert meta.get("grade") and meta.get("points", 0) > 0, f"{source.name}: {meta['grade_id']}"
            if meta.get("grade"):
                assert meta.get("points", 0) > 0, f"{source.name}: {meta['grade_id']} has no points"


# --- the generator ---------------------------------------------------------------------------


def test_student_source_stubs_solutions_and_drops_hidden_tests():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n### BEGIN HIDDEN TESTS\nassert f(1) == 2\n### END HIDDEN TESTS\nprint(1)"
    assert release_exercises.student_source(source, "code") == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\nprint(1)"
    )
    assert release_exercises.solution_source(source, "code") == "def f(x):\n    return 2 * x\nassert f(1) == 2\nprint(1)"
    assert release_exercises.student_source("### BEGIN SOLUTION\nThe answer.\n### END SOLUTION", "markdown") == "YOUR ANSWER HERE"


def test_unbalanced_markers_are_an_error():
    with pytest.raises(release_exercises.ReleaseError, match="never closed"):
        release_exercises.student_source("### BEGIN SOLUTION\nx = 1", "code", "nb, cell 3")
    with pytest.raises(release_exercises.ReleaseError, match="without"):
        release_exercises.student_source("x = 1\n### END SOLUTION", "code")


def _release(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--source", str(tmp_path / "source"), "--release", str(tmp_path / "release"), *extra],
        capture_output=True,
        text=True,
    )


def test_generator_never_clobbers_an_edited_student_notebook(tmp_path):
    shutil.copytree(EXERCISES / "source", tmp_path / "source")
    assert _release(tmp_path).returncode == 0
    student = tmp_path / "release" / SOURCES[0].name
    notebook = nbformat.read(student, 4)
    code = next(c for c in notebook.cells if "raise NotImplementedError()" in c.source)
    code.source = code.source.replace("raise NotImplementedError()", "pass  # my work")
    nbformat.write(notebook, student)
    edited = student.read_bytes()

    # the source changes: every release is out of date, but the edited one is refused
    _edit_the_source(tmp_path)
    done = _release(tmp_path)
    assert done.returncode == 1
    assert "refused" in done.stdout and "edited after it was generated" in done.stdout
    assert student.read_bytes() == edited
    solution = tmp_path / "release" / "solutions" / f"{SOURCES[0].stem}__SOLUTION.ipynb"
    assert "A new sentence." in solution.read_text()  # the untouched solution was regenerated

    done = _release(tmp_path, "--force")
    assert done.returncode == 0
    assert "my work" not in student.read_text() and "A new sentence." in student.read_text()
    kept = sorted(student.parent.glob(f"{student.name}.student-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == edited  # the student's notebook, kept as it was
    assert f"the old one is kept as {kept[0].name}" in done.stdout
    assert not list(student.parent.glob(f"{SOURCES[1].name}.student-*"))  # an untouched one needs no copy


def _tag_and_hide(notebook) -> None:
    """What a student does in JupyterLab without typing code: tag a cell, hide an input."""
    cell = next(c for c in notebook.cells if c.cell_type == "code")
    cell.metadata["tags"] = ["my-notes"]
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


def _edit_the_source(tmp_path: Path) -> None:
    source = nbformat.read(tmp_path / "source" / SOURCES[0].name, 4)
    source.cells[0].source += "\n\nA new sentence."
    nbformat.write(source, tmp_path / "source" / SOURCES[0].name)


def test_generator_never_drops_a_students_tags_or_hidden_cells(tmp_path):
    shutil.copytree(EXERCISES / "source", tmp_path / "source")
    assert _release(tmp_path).returncode == 0
    student = tmp_path / "release" / SOURCES[0].name
    notebook = nbformat.read(student, 4)
    _tag_and_hide(notebook)
    nbformat.write(notebook, student)
    tagged = student.read_bytes()

    assert _release(tmp_path).returncode == 0 and student.read_bytes() == tagged  # nothing upstream: left alone
    _edit_the_source(tmp_path)
    done = _release(tmp_path)
    assert done.returncode == 1 and student.read_bytes() == tagged
    assert "refused" in done.stdout and "metadata (tags, hidden or collapsed cells) was changed" in done.stdout
    done = _release(tmp_path, "--force")
    kept = sorted(student.parent.glob(f"{student.name}.student-*"))
    assert done.returncode == 0 and len(kept) == 1 and kept[0].read_bytes() == tagged


def test_a_notebook_released_before_metadata_was_recorded_keeps_its_tags_too(tmp_path):
    shutil.copytree(EXERCISES / "source", tmp_path / "source")
    assert _release(tmp_path).returncode == 0
    student = tmp_path / "release" / SOURCES[0].name
    notebook = nbformat.read(student, 4)
    del notebook.metadata[release_exercises.METADATA_KEY]["metadata_sha256"]  # as an older release wrote it
    untouched = copy.deepcopy(notebook)
    _tag_and_hide(notebook)
    nbformat.write(notebook, student)
    done = _release(tmp_path)
    assert done.returncode == 1 and "metadata (tags" in done.stdout
    nbformat.write(untouched, student)  # the same old release, not tagged: brought up to date
    assert _release(tmp_path).returncode == 0
    assert "metadata_sha256" in nbformat.read(student, 4).metadata[release_exercises.METADATA_KEY]


def test_generator_never_clobbers_a_student_notebook_that_was_only_run(tmp_path):
    shutil.copytree(EXERCISES / "source", tmp_path / "source")
    assert _release(tmp_path).returncode == 0
    student = tmp_path / "release" / SOURCES[0].name
    notebook = nbformat.read(student, 4)
    first = next(c for c in notebook.cells if c.cell_type == "code")
    first.outputs = [nbformat.v4.new_output("stream", text="backend: simulator\n")]
    first.execution_count = 1
    nbformat.write(notebook, student)
    ran = student.read_bytes()

    assert _release(tmp_path).returncode == 0  # nothing changed: a run notebook is left as it is
    assert student.read_bytes() == ran

    _edit_the_source(tmp_path)
    done = _release(tmp_path)
    assert done.returncode == 1
    assert "refused" in done.stdout and "it was run after it was generated" in done.stdout
    assert student.read_bytes() == ran
    done = _release(tmp_path, "--check")
    assert done.returncode == 1 and "it was run after it was generated" in done.stdout


def test_generator_refuses_a_notebook_it_did_not_write(tmp_path):
    shutil.copytree(EXERCISES / "source", tmp_path / "source")
    (tmp_path / "release").mkdir()
    foreign = tmp_path / "release" / SOURCES[1].name
    nbformat.write(nbformat.v4.new_notebook(), foreign)
    done = _release(tmp_path)
    assert done.returncode == 1 and "not written by this script" in done.stdout
    assert nbformat.read(foreign, 4).cells == []


def test_generator_leaves_an_executed_solution_alone(tmp_path):
    shutil.copytree(EXERCISES / "source", tmp_path / "source")
    _release(tmp_path)
    solution = tmp_path / "release" / "solutions" / f"{SOURCES[0].stem}__SOLUTION.ipynb"
    notebook = nbformat.read(solution, 4)
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", text="backend: gpu\n")]
    notebook.cells[1].execution_count = 1
    nbformat.write(notebook, solution)
    done = _release(tmp_path)
    assert done.returncode == 0 and "up to date" in done.stdout
    assert "backend: gpu" in solution.read_text()


def test_generator_will_not_write_into_its_source_folder(tmp_path):
    shutil.copytree(EXERCISES / "source", tmp_path / "source")
    with pytest.raises(release_exercises.ReleaseError):
        release_exercises.release(tmp_path / "source", tmp_path / "source")


@pytest.mark.skipif(not helpers.is_simulator(), reason="on a GPU the solutions are graded with the PTX ledger itself")
@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_solution_kernels_can_be_counted_from_their_ptx(source, tmp_path):
    """On a GPU the ledger reads the PTX: every access of a solution kernel must be attributable."""
    import inspect

    import numpy as np
    from numba import cuda

    from helpers.counting.ptx import count_global_accesses

    exercise = grading.EXERCISES[int(source.name[:2])]
    inputs = exercise.draw(300, np.random.default_rng(0))
    module = _solution_module(source, tmp_path)
    notebook = nbformat.read(source, 4)
    solution_code = "".join(c.source for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution"))
    kernels = [k for name, k in vars(module).items() if hasattr(k, "fn") and f"def {name}(" in solution_code]
    assert kernels
    small = {"m": 1, "partial": 2} if exercise.number == 4 else {}  # exercise 4's one-number results
    for kernel in kernels:
        args = []
        for name in inspect.signature(kernel.fn).parameters:
            value = inputs.get(name)
            if name in small:
                args.append(cuda.to_device(np.zeros(small[name], np.float32)))
            elif isinstance(value, np.ndarray) or name in exercise.outputs:
                args.append(cuda.to_device(np.zeros(300, np.float32)))
            elif value is not None:
                args.append(value)
            else:  # a number the launching function computes (a bias correction, say)
                args.append(np.float32(0.5))
        counts = count_global_accesses(kernel, args)
        assert not counts.unattributed, f"{kernel.fn.__name__}: {counts.unattributed}"
        assert counts.loads() >= 1 and counts.stores() >= 1


# --- the payoff: what fusing buys, timed on a GPU ------------------------------------------------


def test_speedups_in_the_simulator_say_they_cannot_time_and_show_the_committed_figure(capsys):
    from helpers.classroom import speedups

    if not helpers.is_simulator():
        pytest.skip("on a GPU show() measures")
    module = reference.reference_module(1)
    assert speedups.show(1, module.saxpy_relu, module.saxpy_relu_unfused) is None
    out = capsys.readouterr().out
    assert out.startswith("The simulator cannot time kernels")
    record = speedups.load()
    if record is None or record.row(1) is None:
        assert "No GPU measurement of this exercise is committed yet" in out
    else:
        row = record.row(1)
        assert f"{row.speedup:.2f}x faster" in out and record.provenance.describe() in out


def test_speedups_of_an_exercise_that_does_not_exist_are_refused():
    from helpers.classroom import speedups

    module = reference.reference_module(1)
    for number in (9, True):
        with pytest.raises(ValueError, match=f"there is no exercise {number!r}"):
            speedups.show(number, module.saxpy_relu, module.saxpy_relu_unfused)


def test_speedups_measure_every_reference_with_a_stand_in_clock(monkeypatch, tmp_path, capsys):
    """The GPU path, run in the simulator with a stand-in clock: the plumbing, the ledger's bytes, the record."""
    from helpers import results, timing
    from helpers.classroom import speedups

    clock = {"unfused": 2.0, "fused": 0.8}
    monkeypatch.setattr(speedups, "is_simulator", lambda: False)
    monkeypatch.setattr(speedups, "time_gpu", lambda run, label="", repeats=1: (run(), timing.Timing(label, [clock[label]]))[1])
    monkeypatch.setattr(speedups, "save", lambda record: results.save(record, tmp_path))
    assert speedups.main(["--size", "300", "--repeats", "1"]) == 0
    record = speedups.load(tmp_path)
    assert record.provenance is not None
    assert [r.exercise for r in record.rows] == sorted(grading.EXERCISES)
    for row in record.rows:
        exercise = grading.EXERCISES[row.exercise]
        assert row.speedup == pytest.approx(2.5) and row.n == 300 and row.unfused_launches > 1
        assert row.fused_bytes_per_element == exercise.bytes_per_element  # counted by the ledger
        assert row.unfused_bytes_per_element > row.fused_bytes_per_element
    assert "5 an AdamW step" in capsys.readouterr().out
    assert record.row(4).one_block_fused_us == pytest.approx(800)  # exercise 4's split: fusion, then many blocks
    assert all(r.one_block_fused_us is None for r in record.rows if r.exercise != 4)
    monkeypatch.setattr(speedups, "load", lambda: record)
    assert "the fusion alone gives 2.50x, and sharing the first pass among many blocks the other 1.00x" in (
        speedups.committed_line(4))
    with pytest.raises(SystemExit):
        speedups.main(["--exercises", "9"])


def test_committed_speedups_are_consistent():
    from helpers.classroom import speedups

    record = speedups.load()
    if record is None:
        pytest.skip("no committed GPU result yet (scripts/gpu/ex_speedups.sh makes it)")
    assert "H200" in record.provenance.device
    for row in record.rows:
        assert row.unfused_us > 0 and row.fused_us > 0
        assert row.speedup == pytest.approx(row.unfused_us / row.fused_us)
        assert row.fused_bytes_per_element in (None, grading.EXERCISES[row.exercise].bytes_per_element)


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_exercise_ends_with_its_payoff_and_keeps_graded_answers_out_of_its_summary(source):
    number = int(source.name[:2])
    exercise = grading.EXERCISES[number]
    student = nbformat.read(release_exercises.release_paths(source, EXERCISES)["student"], 4)
    code = [c.source for c in student.cells if c.cell_type == "code"]
    assert any(f"speedups.show({number}, {exercise.function}, {exercise.unfused})" in c for c in code)
    summary = next(c.source for c in reversed(student.cells) if c.source.startswith("## Summary"))
    solution = nbformat.read(source, 4)
    answers = "\n".join(c.source for c in solution.cells if c.metadata.get("nbgrader", {}).get("solution"))
    numbers = set(re.findall(r"= (\d+)", answers))  # the predicted counts a student must find
    shown = set(re.findall(r"\b\d+\b", summary))
    assert not numbers & shown, f"{source.name}: the summary gives away {numbers & shown}"
