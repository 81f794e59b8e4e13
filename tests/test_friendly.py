"""Friendly failures: a notebook opened with the wrong kernel says what to do."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.friendly import FIRST_CELL, KERNEL_DISPLAY_NAME, is_first_cell

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
