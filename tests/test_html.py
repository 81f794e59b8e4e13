"""The HTML edition (`make html`): builds, lists the lessons in order, shows plots inline, no dead links."""

from __future__ import annotations

import importlib.util
import sys
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("nbconvert", reason="nbconvert is not installed here (`make setup` installs the dev extras)")

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("build_html", ROOT / "scripts" / "build_html.py")
build_html = importlib.util.module_from_spec(_spec)
sys.modules["build_html"] = build_html
_spec.loader.exec_module(build_html)


class _Links(HTMLParser):
    """Collects link targets (href/src) and element ids of one page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (tag, url)
        self.ids: set[str] = set()
        self.lesson_links: list[str] = []
        self._in_lessons = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name"):
            if values.get(key):
                self.ids.add(values[key])
        if tag == "ol" and values.get("class") == "lessons":
            self._in_lessons = True
        for key in ("href", "src"):
            if values.get(key) is not None:
                self.links.append((tag, values[key]))
                if self._in_lessons and tag == "a":
                    self.lesson_links.append(values[key])

    def handle_endtag(self, tag: str) -> None:
        if tag == "ol":
            self._in_lessons = False


def parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text())
    return parser


def has_anchor(ids: set[str], fragment: str) -> bool:
    """A browser matches a fragment against ids as written, then percent-decoded."""
    return fragment in ids or urllib.parse.unquote(fragment) in ids


def is_local(url: str) -> bool:
    return not build_html.EXTERNAL.match(url) and url != ""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html")
    built = build_html.build(out)
    assert not built.broken, "links that do not resolve:\n" + "\n".join(built.broken)
    return out


def test_index_lists_the_lessons_in_series_order(site: Path) -> None:
    index = parse(site / "index.html")
    expected = [f"notebooks/{p.stem}.html" for p in build_html.lessons()]
    assert index.lesson_links == expected


def test_every_notebook_has_a_page(site: Path) -> None:
    sources = build_html.lessons() + build_html.exercises() + build_html.solutions()
    missing = [str(p) for p in sources if not (site / p.relative_to(ROOT)).with_suffix(".html").exists()]
    assert not missing


def test_every_local_link_resolves(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    ids = {page: parse(page).ids for page in pages}
    dead = []
    for page in pages:
        for tag, url in parse(page).links:
            if not is_local(url):
                if url.startswith("#") and len(url) > 1 and not has_anchor(ids[page], url[1:]):
                    dead.append(f"{page.relative_to(site)}: <{tag}> {url} (no such anchor)")
                continue
            path, _, fragment = url.partition("#")
            target = (page.parent / urllib.parse.unquote(path)).resolve()
            if not target.is_file() or site.resolve() not in target.parents:
                dead.append(f"{page.relative_to(site)}: <{tag}> {url} (no such file in the site)")
            elif fragment and target.suffix == ".html" and not has_anchor(ids[target], fragment):
                dead.append(f"{page.relative_to(site)}: <{tag}> {url} (no such anchor)")
    assert not dead, "\n".join(dead)


def test_notebook_links_point_at_pages_not_ipynb(site: Path) -> None:
    stray = [f"{page.relative_to(site)}: {url}" for page in site.rglob("*.html")
             for _, url in parse(page).links if is_local(url) and ".ipynb" in url.split("#")[0]]
    assert not stray


def test_lessons_link_to_their_neighbours(site: Path) -> None:
    names = [f"{p.stem}.html" for p in build_html.lessons()]
    for before, after in zip(names, names[1:]):
        links = {url for _, url in parse(site / "notebooks" / before).links}
        assert after in links, f"{before} has no link to {after}"


def test_plots_are_inline(site: Path) -> None:
    for path in build_html.lessons() + build_html.solutions():
        notebook = nbformat.read(path, as_version=4)
        images = sum("image/png" in out.get("data", {}) for cell in notebook.cells for out in cell.get("outputs", []))
        page = (site / path.relative_to(ROOT)).with_suffix(".html").read_text()
        assert page.count('src="data:image/png;base64,') >= images, f"{path.name}: {images} plots in the notebook"


def test_a_dead_link_fails_the_build(tmp_path: Path) -> None:
    (tmp_path / "notebooks").mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# One\n\nSee [two](02_two.ipynb) and [a plot](../results/nowhere.png).")]
    nbformat.write(notebook, tmp_path / "notebooks" / "01_one.ipynb")
    built = build_html.build(tmp_path / "out", root=tmp_path)
    assert len(built.broken) == 2 and all("01_one.ipynb" in b for b in built.broken), built.broken


def test_links_between_notebooks_are_rewritten(tmp_path: Path) -> None:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "plot.png").write_bytes(b"\x89PNG\r\n")
    for name, text in (("01_one", "# One\n\nNext: [two](02_two.ipynb#Two), plot: ![p](../results/plot.png), [all](./)"),
                       ("02_two", "# Two\n\nBack to [one](01_one.ipynb).")):
        notebook = nbformat.v4.new_notebook()
        notebook.cells = [nbformat.v4.new_markdown_cell(text)]
        nbformat.write(notebook, tmp_path / "notebooks" / f"{name}.ipynb")
    built = build_html.build(tmp_path / "out", root=tmp_path)
    assert not built.broken
    first = parse(tmp_path / "out" / "notebooks" / "01_one.html")
    assert ("a", "02_two.html#Two") in first.links
    assert ("img", "../results/plot.png") in first.links
    assert ("a", "../index.html#lessons") in first.links  # a folder of notebooks: its section of the index
    assert (tmp_path / "out" / "results" / "plot.png").exists()
