"""The README and the teaching guide describe one course: the same notebooks, words, exercises and paths."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README, GUIDE = (ROOT / "README.md").read_text(), (ROOT / "docs" / "teaching.md").read_text()
PATHS = re.compile(r"\*\*Two paths through it\.\*\*[^\n]+")


def readme_rows() -> list[tuple[str, str, str]]:
    return re.findall(r"^\| \[`(\d\d_\w+)`\]\(notebooks/\1\.ipynb\) \| (.+?) \| (.*?) \|$", README, re.M)


def guide_rows() -> list[tuple[str, str, str]]:
    return [(nb, what, then) for nb, what, _, then in
            re.findall(r"^\| \d\d \| `(\d\d_\w+)` \| (.+?) \| (\d+ min[^|]*?) \| (.*?) \|$", GUIDE, re.M)]


def test_both_tables_list_every_lesson_in_order_with_the_same_words():
    lessons = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [nb for nb, *_ in readme_rows()] == lessons
    assert readme_rows() == guide_rows()


def test_every_exercise_follows_the_lesson_the_guide_names():
    after = {int(n): f"{lesson}" for n, lesson in
             re.findall(r"^\| `0(\d)__\w+` \| (\d\d) \|", GUIDE, re.M)}
    assert sorted(after) == [1, 2, 3, 4, 5]
    for number, lesson in after.items():
        then = next(then for nb, _, then in readme_rows() if nb.startswith(lesson))
        assert f"{number}" in then and "exercise" in then, (number, lesson, then)


def test_both_name_the_core_path_and_the_full_course():
    found = [PATHS.search(text) for text in (README, GUIDE)]
    assert all(found) and found[0].group(0) == found[1].group(0)
    assert "01 → 03 and exercise 1" in found[0].group(0) and "01–14" in found[0].group(0)
