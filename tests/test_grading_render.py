"""A student reads the grader's sentence first: in a notebook a failed check shows as one line,
without the grader's frames and without machine paths (nbgrader's feedback shows the same output)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.classroom import grading

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent

CELLS = [
    "import helpers\nfrom helpers.classroom import grading",
    "def saxpy_relu(a, x, y):\n    pass",
    "grading.check_exercise_1(saxpy_relu)",
    "grading.check(True, saxpy_relu)",
    "def own_bug(a, x, y, out):\n    raise ZeroDivisionError('my own mistake')\n\ngrading.check_exercise_1(own_bug)",
]


def test_a_verdict_renders_as_its_sentence_alone():
    failure = grading.CheckFailed("element 3 of `out` was never written")
    assert failure._render_traceback_() == ["CheckFailed: element 3 of `out` was never written"]
    assert grading.BadArgument("there is no exercise 9")._render_traceback_() == [
        "BadArgument: there is no exercise 9"]


def test_a_notebook_shows_the_graders_sentence_and_the_students_own_traceback(tmp_path, monkeypatch):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    # "python3": the kernel of the interpreter running the tests (jupyter_client starts sys.executable)
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [next((o for o in cell.outputs if o.output_type == "error"), None) for cell in notebook.cells]
    assert errors[0] is None and errors[1] is None, errors[:2]
    signature, called_wrongly, own = errors[2], errors[3], errors[4]
    assert signature.traceback == [
        "CheckFailed: `saxpy_relu` must take the 4 arguments `saxpy_relu(a, x, y, out)`, in this order; "
        "yours takes (a, x, y)"]
    assert signature.ename == "CheckFailed"
    assert called_wrongly.traceback == ["BadArgument: there is no exercise True; the exercises are [1, 2, 3, 4, 5]"]
    for shown in (signature, called_wrongly):
        text = "\n".join(shown.traceback)
        assert "grading.py" not in text and str(ROOT) not in text and "Traceback" not in text
    own_text = "\n".join(own.traceback)  # the student's own error keeps its frames: they are the student's
    assert own.ename == "ZeroDivisionError" and "my own mistake" in own_text and len(own.traceback) > 1
