"""Every measured figure quoted in a lesson's markdown agrees with the committed data it cites.

Markers (see ``scripts/prose_figures.py``) tie each quoted number to a committed result or
to the notebook's own outputs; in every lesson, a number with a unit
of time, bandwidth, percent or ratio must carry one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import prose_figures as prose  # noqa: E402  (a docs check in scripts/, like import_graph.py)

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# Figures that are not measurements: predictions from the counts, and rules of thumb.
CONSTANTS = ("2×", "2.0×", "3×", "100%", "0%", "25%", "10%", "3%",
             "64 GB/s", "900 GB/s", "450 GB/s")  # the last three: link datasheet figures (notebook 08)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_quoted_figures_agree_with_their_data(path):
    problems = prose.check_notebook(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_measured_figures_in_prose_are_marked(path):
    """Every lesson: a number with a unit of time, bandwidth, percent or ratio carries a marker."""
    nb = nbformat.read(path, as_version=4)
    unmarked = [f"c{i}: {f!r}" for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
                for f in prose.unmarked_figures(cell.source, CONSTANTS)]
    assert not unmarked, "figures without a marker (print them from code, or mark them):\n" + "\n".join(unmarked)


def test_every_figure_computes_and_is_quoted_somewhere():
    text = "\n".join(c.source for p in NOTEBOOKS for c in nbformat.read(p, as_version=4).cells)
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for name, fn in prose.FIGURES.items():
        assert isinstance(fn(), float), name
        assert re.search(rf"fig(<=|>=)?: {name}\b", text + readme), f"figure {name!r} is registered but quoted nowhere"


# --- the mechanism itself, on doctored examples --------------------------------------


def test_a_doctored_figure_fails():
    figures = {"speedup": lambda: 2.2727}
    assert prose.check_markdown("fused is 2.27×<!-- fig: speedup --> faster", figures=figures) == []
    problems = prose.check_markdown("fused is 2.40×<!-- fig: speedup --> faster", figures=figures)
    assert len(problems) == 1 and "quoted 2.4" in problems[0] and "2.2727" in problems[0]


def test_precision_thousands_and_approximation():
    figures = {"gbs": lambda: 4502.3, "tiny": lambda: 4.76837e-7}
    assert prose.check_markdown("**4,502 GB/s**<!-- fig: gbs -->", figures=figures) == []
    assert prose.check_markdown("4.5 TB/s<!-- fig: gbs -->", figures={"gbs": lambda: 4.5023}) == []
    assert prose.check_markdown("4,510 GB/s<!-- fig: gbs -->", figures=figures) != []
    assert prose.check_markdown("~4,500 GB/s<!-- fig: gbs -->", figures=figures) == []  # 4,450 to 4,550
    assert prose.check_markdown("~4,400 GB/s<!-- fig: gbs -->", figures=figures) != []  # 2.3% off: once allowed
    assert prose.check_markdown("~4,000 GB/s<!-- fig: gbs -->", figures=figures) != []
    assert prose.check_markdown("4.77e-7<!-- fig: tiny -->", figures=figures) == []


def test_output_markers_read_the_notebooks_outputs():
    patterns = {"speedup": r"measured (\d+\.\d+)x"}
    outputs = "speedup: predicted 2.00x from bytes, measured 2.40x"
    assert prose.check_markdown("measured 2.4×<!-- out: speedup -->", outputs, patterns=patterns) == []
    assert prose.check_markdown("measured 2.2×<!-- out: speedup -->", outputs, patterns=patterns) != []
    assert "not found" in prose.check_markdown("2.4×<!-- out: speedup -->", "", patterns=patterns)[0]


def test_unknown_names_and_missing_numbers_are_reported():
    assert "unknown figure" in prose.check_markdown("2.0<!-- fig: nope -->", figures={})[0]
    assert "no number" in prose.check_markdown("fast<!-- fig: x -->", figures={"x": lambda: 1.0})[0]


def test_unmarked_figures_are_found():
    text = "takes 235 µs, reaches 83% and 2.40×<!-- fig: s -->; predicted 2×"
    assert prose.unmarked_figures(text, ("2×",)) == ["235 µs", "83%"]


def test_the_command_line_checks_and_fails_on_a_doctored_notebook(tmp_path, capsys):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("The bound is 4.9 TB/s<!-- fig: hbm_bound_tbs -->.")]
    nbformat.write(nb, tmp_path / "01_x.ipynb")
    assert prose.main([str(tmp_path / "01_x.ipynb")]) == 1
    assert "quoted 4.9" in capsys.readouterr().out
    nb.cells[0].source = "The bound is 4.8 TB/s<!-- fig: hbm_bound_tbs -->."
    nbformat.write(nb, tmp_path / "01_x.ipynb")
    assert prose.main([str(tmp_path / "01_x.ipynb")]) == 0


def test_about_allows_no_more_than_the_precision_written():
    figures = {"speedup": lambda: 2.34}
    assert prose.check_markdown("about 2.3×<!-- fig: speedup -->", figures=figures) == []
    assert prose.check_markdown("about 2.27×<!-- fig: speedup -->", figures=figures) != []  # 3% off: once allowed
    assert prose.check_markdown("about 2.34×<!-- fig: speedup -->", figures=figures) == []
    assert prose.check_markdown("about 2.33×<!-- fig: speedup -->", figures=figures) != []


def test_approximate_quotes_and_bounds():
    figures = {"fma": lambda: 9.41, "stall": lambda: 76.2}
    assert prose.check_markdown("about 9%<!-- fig: fma -->", figures=figures) == []  # 9.41 rounds to 9
    assert prose.check_markdown("about 10%<!-- fig: fma -->", figures=figures) != []
    assert prose.check_markdown("about 8%<!-- fig: fma -->", figures=figures) != []
    assert prose.check_markdown("at most 10%<!-- fig<=: fma -->", figures=figures) == []
    assert "bound" in prose.check_markdown("at most 9%<!-- fig<=: fma -->", figures=figures)[0]
    assert prose.check_markdown("at least 75%<!-- fig>=: stall -->", figures=figures) == []
    assert prose.check_markdown("at least 80%<!-- fig>=: stall -->", figures=figures) != []
