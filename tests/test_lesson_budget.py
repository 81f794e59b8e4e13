"""Each lesson reads as a lesson: at most 1,600 words of markdown (quoted code included, HTML comments not),
at most 60 printed lines, no printed table of more than 12 rows, and at least one plot where it measures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WORDS, LINES, TABLE_ROWS = 1600, 60, 12
COMMENT = re.compile(r"<!--.*?-->", re.S)
COLUMNS = re.compile(r"\S(?: {2,}|\t)\S.*\S(?: {2,}|\t)\S")  # a line of three or more columns, two spaces apart
NO_PLOT = {"01_three_kernels"}  # counts bytes, times nothing


def words(notebook: dict) -> int:
    """Markdown words, as a reader meets them: HTML comments (the figure markers) removed, quoted code kept."""
    text = " ".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    return len(COMMENT.sub(" ", text).split())


def printed(notebook: dict) -> list[list[str]]:
    """The printed lines of each output (text and plain-text results, a figure's one-line repr included)."""
    found = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", "")) or "".join(output.get("data", {}).get("text/plain", ""))
            found.append(text.splitlines())
    return found


def longest_table(notebook: dict) -> int:
    """The most rows of a printed table: consecutive lines of one output that each hold three or more space-aligned
    columns, less the first (its header)."""
    longest = 0
    for lines in printed(notebook):
        run = 0
        for line in lines:
            run = run + 1 if COLUMNS.search(line) else 0
            longest = max(longest, run - 1)
    return longest


def plots(notebook: dict) -> int:
    return sum("image/png" in o.get("data", {}) for c in notebook["cells"] for o in c.get("outputs", []))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_is_within_its_budget(path: Path) -> None:
    notebook = json.loads(path.read_text())
    lines = sum(len(output) for output in printed(notebook))
    assert words(notebook) <= WORDS, f"{path.stem}: {words(notebook)} words of markdown, over {WORDS}"
    assert lines <= LINES, f"{path.stem}: {lines} printed lines, over {LINES}"
    assert longest_table(notebook) <= TABLE_ROWS, f"{path.stem}: a printed table of {longest_table(notebook)} rows"
    assert path.stem in NO_PLOT or plots(notebook) >= 1, f"{path.stem} measures but shows no plot"


def _notebook(markdown: str = "", printed_text: str = "", png: bool = False) -> dict:
    output = {"output_type": "stream", "name": "stdout", "text": printed_text}
    figure = {"output_type": "display_data", "data": {"image/png": "", "text/plain": "<Figure>"}}
    return {"cells": [{"cell_type": "markdown", "source": markdown},
                      {"cell_type": "code", "source": "", "outputs": [output] + ([figure] if png else [])}]}


def test_the_counts_fail_on_what_they_guard() -> None:
    assert words(_notebook("two words<!-- fig: a_marker_of_many_words -->\n```python\nx = 1\n```")) == 7  # "two", "words", and the quote's five
    assert sum(map(len, printed(_notebook(printed_text="a\nb\n", png=True)))) == 3  # two lines and a figure's repr
    table = "".join(f"row {i}    {i} ms    {2 * i} GB/s\n" for i in range(13))
    assert longest_table(_notebook(printed_text="a sentence, not a table\n" + table)) == 12  # a header and 12 rows
    assert longest_table(_notebook(printed_text="three  kernels: 6 trips\nfused: 2 trips\n")) == 0
    assert plots(_notebook(png=True)) == 1 and plots(_notebook()) == 0
