"""What a reader sees in a committed lesson or solution is the lesson: no stderr, no warnings,
no ANSI colour codes, no tracebacks, no paths of the machine that ran it.

A cell that is there to show an error carries nbval's ``raises-exception`` tag; one that is there
to show a library's warning (notebook 08 counts Numba's hidden-copy warnings) carries
``shows-warnings``, which allows the word, never stderr, colour codes or paths.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "notebooks" / "exercises" / "solutions").glob("*.ipynb"))
ANSI = re.compile(r"\x1b\[")
PATH = re.compile(r"(?:/opt/|/usr/|/home/|/tmp/|/work/|/root/|site-packages|[A-Z]:\\\\Users)")
WARNING = re.compile(r"\b\w*Warning\b|\bwarn(?:ing)?:", re.IGNORECASE)
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")


def output_text(output: dict) -> str:
    if "text" in output:
        return "".join(output["text"])
    data = output.get("data", {})
    return "".join(data.get("text/plain", "")) + "".join(output.get("traceback", []))


def problems(notebook: dict, name: str = "notebook") -> list[str]:
    """Each output that breaks the rules, as ``name cell N: what``."""
    found = []
    for i, cell in enumerate(notebook["cells"]):
        tags = set(cell.get("metadata", {}).get("tags", []))
        for output in cell.get("outputs", []):
            text, where = output_text(output), f"{name} cell {i}"
            if output.get("name") == "stderr":
                found.append(f"{where}: stderr {text[:80]!r}")
            if output.get("output_type") == "error" and "raises-exception" not in tags:
                found.append(f"{where}: an error ({output.get('ename')})")
            for pattern, what in ((ANSI, "ANSI colour codes"), (PATH, "a machine path"), (TRACEBACK, "a traceback")):
                if pattern.search(text):
                    found.append(f"{where}: {what} in {text[:80]!r}")
            if "shows-warnings" not in tags and WARNING.search(text):
                found.append(f"{where}: a warning in {text[:80]!r}")
    return found


READ = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted((ROOT / "notebooks" / "exercises").glob(
    "[0-9][0-9]__*.ipynb")) + sorted((ROOT / "notebooks" / "exercises" / "solutions").glob("*.ipynb"))


LINK = re.compile(r"\]\((?!https?:|/)([\w./-]+\.\w+)(?:#[\w-]*)?\)")  # a link to a file, not `f[grid, block](...)`


@pytest.mark.parametrize("path", READ + sorted((ROOT / "notebooks" / "exercises" / "source").glob("*.ipynb")),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_relative_link_in_the_markdown_leads_to_a_file(path: Path) -> None:
    cells = json.loads(path.read_text())["cells"]
    targets = {t for c in cells if c["cell_type"] == "markdown" for t in LINK.findall("".join(c["source"]))}
    where = path.parent.parent if path.parent.name == "source" else path.parent  # a source speaks as its student
    assert [t for t in sorted(targets) if not (where / t).exists()] == [], f"{path.name}: links to nothing"


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_committed_outputs_are_clean(path: Path) -> None:
    assert problems(json.loads(path.read_text()), path.name) == []


def _notebook(output: dict, tags: tuple[str, ...] = ()) -> dict:
    return {"cells": [{"cell_type": "code", "metadata": {"tags": list(tags)}, "outputs": [output], "source": ""}]}


def test_the_check_fails_on_each_kind_of_dirt() -> None:
    stream = lambda name, text: {"output_type": "stream", "name": name, "text": text}  # noqa: E731
    assert problems(_notebook(stream("stdout", "fused: 2 trips\n"))) == []
    assert problems(_notebook(stream("stderr", "numba fused (best): ...\n")))
    assert problems(_notebook(stream("stdout", "/opt/venv/lib/python3.12/site-packages/tqdm/auto.py:21: TqdmWarning\n")))
    assert problems(_notebook(stream("stdout", "\x1b[1mGrid size 1\x1b[0m\n")))
    assert problems(_notebook(stream("stdout", "NumbaPerformanceWarning (8x): Host array used\n")))
    assert problems(_notebook(stream("stdout", "NumbaPerformanceWarning (8x): Host array used\n"), ("shows-warnings",))) == []
    error = {"output_type": "error", "ename": "CheckFailed", "evalue": "", "traceback": ["CheckFailed: wrong"]}
    assert problems(_notebook(error)) and problems(_notebook(error, ("raises-exception",))) == []
