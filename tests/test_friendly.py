"""Friendly failures: a notebook opened with the wrong kernel says what to do."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.friendly import FIRST_CELL, KERNEL_DISPLAY_NAME, KERNELSPEC, colab_badge, is_first_cell

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(
    [*ROOT.glob("notebooks/[0-9]*.ipynb"), *ROOT.glob("notebooks/exercises/*.ipynb"),
     *ROOT.glob("notebooks/exercises/solutions/*.ipynb"), *ROOT.glob("notebooks/exercises/source/*.ipynb")]
)


def run_first_cell(python: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*python, "-c", FIRST_CELL], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_wrong_kernel_gets_told_what_to_do(tmp_path: Path) -> None:
    # -I -S: a Python that sees neither this project nor any installed package, as a
    # system kernel would; run from a folder without `helpers`, as a stray copy would be.
    result = run_first_cell([sys.executable, "-I", "-S"], tmp_path)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: 'helpers' cannot be imported"), last
    assert "`make lab`" in last and KERNEL_DISPLAY_NAME in last
    assert "Traceback" in result.stderr and "No module named" not in result.stderr  # the bare error is hidden


def test_right_kernel_prints_the_banner(tmp_path: Path) -> None:
    result = run_first_cell([sys.executable], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.fullmatch(r"backend: (simulator|gpu \(.+, \d+ SMs\))", result.stdout.strip()), result.stdout


def test_the_message_names_the_kernel_that_make_setup_registers() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert f'--display-name "{KERNEL_DISPLAY_NAME}"' in makefile


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(ROOT / "notebooks")) for p in NOTEBOOKS])
def test_every_notebook_opens_with_the_friendly_cell(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    assert is_first_cell(first.source), (
        f"{path.name}: the first code cell is not helpers.friendly.FIRST_CELL; "
        "run `python scripts/first_cell.py <notebook>` (exercises: edit notebooks/exercises/source, "
        "then `make release-exercises`)")


# -- the badge and the kernel, and the script that writes them ----------------------------------

LESSONS_AND_SOURCES = sorted([*ROOT.glob("notebooks/[0-9]*.ipynb"), *ROOT.glob("notebooks/exercises/source/*.ipynb")])


def _colab_target(path: Path) -> str:
    """The notebook a badge should open: itself (a lesson, a student's exercise, a solution), or for an exercise's
    source the student's notebook made from it."""
    relative = path.relative_to(ROOT)
    if relative.parent.name == "source":
        return f"notebooks/exercises/{path.name}"
    return relative.as_posix()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(ROOT / "notebooks")) for p in NOTEBOOKS])
def test_every_notebook_names_the_projects_kernel_and_opens_in_colab(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    assert dict(notebook.metadata["kernelspec"]) == KERNELSPEC
    first = next(cell for cell in notebook.cells if cell.cell_type == "markdown")
    badge = first.source.split("\n", 1)[0]
    assert badge == colab_badge(_colab_target(path)), f"{path.name}: the first markdown line is {badge!r}"
    assert (ROOT / _colab_target(path)).is_file()


def test_the_kernel_the_notebooks_name_is_the_one_make_registers() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^KERNEL\s*:?=\s*{re.escape(KERNELSPEC['name'])}\s*$", makefile, re.M)


def _first_cell_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "first_cell.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_the_first_cell_script_finds_everything_up_to_date() -> None:
    done = _first_cell_script("--check", *map(str, LESSONS_AND_SOURCES))
    assert done.returncode == 0, done.stdout + done.stderr


def _notebook(first_code: str, tmp_path: Path, **metadata) -> Path:
    notebook = nbformat.v4.new_notebook(metadata=metadata)
    notebook.cells = [nbformat.v4.new_markdown_cell("# A lesson"), nbformat.v4.new_code_cell(first_code)]
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", text="backend: gpu (NVIDIA H200, 132 SMs)\n")]
    path = tmp_path / "notebooks" / "99_a_lesson.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


@pytest.mark.parametrize("opening", ["import helpers\nhelpers.start()", "earlier"])
def test_the_script_brings_a_known_opening_up_to_date_and_keeps_its_output(opening: str, tmp_path: Path, monkeypatch) -> None:
    first_cell = _load_script(monkeypatch, tmp_path)
    path = _notebook(first_cell.EARLIER_CELLS[0] if opening == "earlier" else opening, tmp_path)
    assert first_cell.update(path, check_only=True) == "would update"
    assert first_cell.update(path, check_only=False) == "updated"
    notebook = nbformat.read(path, as_version=4)
    assert is_first_cell(notebook.cells[1].source) and notebook.cells[1].outputs[0].text.startswith("backend: gpu")
    assert notebook.cells[0].source == colab_badge("notebooks/99_a_lesson.ipynb") + "\n\n# A lesson"
    assert dict(notebook.metadata["kernelspec"]) == KERNELSPEC
    assert first_cell.update(path, check_only=False) == "ok"  # a second run changes nothing


def test_the_script_leaves_other_first_cells_and_released_notebooks_alone(tmp_path: Path, monkeypatch) -> None:
    first_cell = _load_script(monkeypatch, tmp_path)
    mine = _notebook("import helpers\nx = 1\nhelpers.start()", tmp_path)
    before = mine.read_bytes()
    assert "edit it by hand" in first_cell.update(mine, check_only=False) and mine.read_bytes() == before
    released = _notebook("import helpers\nhelpers.start()", tmp_path, exercise_release={"kind": "student"})
    before = released.read_bytes()
    assert "release_exercises" in first_cell.update(released, check_only=False) and released.read_bytes() == before


def _load_script(monkeypatch, root: Path):
    """scripts/first_cell.py as a module, with ``root`` as the repository root it resolves paths against."""
    from importlib import util

    spec = util.spec_from_file_location("first_cell_script", ROOT / "scripts" / "first_cell.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "ROOT", root.resolve())
    return module
