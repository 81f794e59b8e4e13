"""The HTML edition (`make html`): builds, lists the lessons in order, shows plots inline, no dead links."""

from __future__ import annotations

import importlib.util
import re
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
    assert not built.undescribed, "\n".join(built.undescribed)
    return out


def test_index_lists_the_lessons_in_series_order(site: Path) -> None:
    index = parse(site / "index.html")
    expected = [f"notebooks/{p.stem}.html" for p in build_html.lessons()]
    assert index.lesson_links == expected


def test_every_notebook_has_a_page_and_the_solutions_none(site: Path) -> None:
    sources = build_html.lessons() + build_html.exercises()
    missing = [str(p) for p in sources if not (site / p.relative_to(ROOT)).with_suffix(".html").exists()]
    assert not missing
    published = [str(p) for p in build_html.solutions() if (site / p.relative_to(ROOT)).with_suffix(".html").exists()]
    assert build_html.solutions() and not published, f"solutions published without --solutions: {published}"
    assert "solution" not in (site / "index.html").read_text().lower()


def _markdown_notebook(path: Path, text: str) -> None:
    """Write a notebook at ``path`` (its folder made if need be) with one markdown cell holding ``text``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(text)]
    nbformat.write(notebook, path)


def test_solutions_are_published_when_asked(tmp_path: Path) -> None:
    folders = {"lesson": tmp_path / "notebooks", "exercise": tmp_path / "notebooks" / "exercises",
               "solution": tmp_path / "notebooks" / "exercises" / "solutions"}
    for kind, folder in folders.items():
        name = {"lesson": "01_one", "exercise": "01__ex", "solution": "01__ex__SOLUTION"}[kind]
        _markdown_notebook(folder / f"{name}.ipynb", f"# The {kind}")
    answer = Path("notebooks/exercises/solutions/01__ex__SOLUTION.html")
    for with_solutions in (False, True):
        out = tmp_path / f"out-{with_solutions}"
        built = build_html.build(out, root=tmp_path, with_solutions=with_solutions)
        assert not built.broken and not built.undescribed
        assert (out / answer).exists() == with_solutions
        assert (str(answer) in {url for _, url in parse(out / "index.html").links}) == with_solutions



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
            path = path.split("?", 1)[0]  # a query (MathJax's ?config=) names no file
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
    for path in build_html.lessons():
        notebook = nbformat.read(path, as_version=4)
        images = sum("image/png" in out.get("data", {}) for cell in notebook.cells for out in cell.get("outputs", []))
        page = (site / path.relative_to(ROOT)).with_suffix(".html").read_text()
        assert page.count('src="data:image/png;base64,') >= images, f"{path.name}: {images} plots in the notebook"


def test_a_dead_link_fails_the_build(tmp_path: Path) -> None:
    _markdown_notebook(tmp_path / "notebooks" / "01_one.ipynb",
                       "# One\n\nSee [two](02_two.ipynb) and [a plot](../results/nowhere.png).")
    built = build_html.build(tmp_path / "out", root=tmp_path)
    assert len(built.broken) == 2 and all("01_one.ipynb" in b for b in built.broken), built.broken


def test_links_between_notebooks_are_rewritten(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "plot.png").write_bytes(b"\x89PNG\r\n")
    for name, text in (("01_one", "# One\n\nNext: [two](02_two.ipynb#Two), plot: ![p](../results/plot.png), [all](./)"),
                       ("02_two", "# Two\n\nBack to [one](01_one.ipynb).")):
        _markdown_notebook(tmp_path / "notebooks" / f"{name}.ipynb", text)
    built = build_html.build(tmp_path / "out", root=tmp_path)
    assert not built.broken
    first = parse(tmp_path / "out" / "notebooks" / "01_one.html")
    assert ("a", "02_two.html#Two") in first.links
    assert ("img", "../results/plot.png") in first.links
    assert ("a", "../index.html#lessons") in first.links  # a folder of notebooks: its section of the index
    assert (tmp_path / "out" / "results" / "plot.png").exists()


# -- offline, and described -------------------------------------------------------------------

NBCONVERT_DEFAULT_ALT = "No description has been provided for this image"


class _Resources(HTMLParser):
    """What a page loads (scripts, styles, images, module imports) and every image's alt text."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.alts: list[str | None] = []
        self._script = False
        self.inline_scripts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("script", "img", "iframe") and values.get("src"):
            self.loads.append(values["src"])
        if tag == "link" and values.get("href") and "stylesheet" in (values.get("rel") or ""):
            self.loads.append(values["href"])
        if tag == "img":
            self.alts.append(values.get("alt"))
        self._script = tag == "script"

    def handle_data(self, data: str) -> None:
        if self._script:
            self.inline_scripts.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._script = False


def resources(page: Path) -> _Resources:
    parser = _Resources()
    parser.feed(page.read_text())
    return parser


def site_pages(site: Path) -> list[Path]:
    return [p for p in sorted(site.rglob("*.html")) if "_static" not in p.relative_to(site).parts]


def test_pages_load_nothing_from_the_network(site: Path) -> None:
    remote = re.compile(r"^(?:[a-z]+:)?//|^https?:", re.I)
    found = []
    for page in site_pages(site):
        parsed = resources(page)
        found += [f"{page.relative_to(site)}: {url}" for url in parsed.loads if remote.match(url)]
        found += [f"{page.relative_to(site)}: import({m})" for script in parsed.inline_scripts
                  for m in re.findall(r"import\(\s*[\"']((?:https?:)?//[^\"']+)", script)]
    assert not found, "\n".join(found)


def test_math_pages_load_mathjax_from_the_site(site: Path) -> None:
    for path in build_html.lessons():
        page = (site / path.relative_to(ROOT)).with_suffix(".html")
        scripts = [u for u in resources(page).loads if "MathJax.js" in u]
        assert len(scripts) == 1, (page.name, scripts)
        assert (page.parent / urllib.parse.unquote(scripts[0].split("?")[0])).resolve().is_file(), scripts[0]


def test_every_image_has_a_real_alt_text(site: Path) -> None:
    bad = [f"{page.relative_to(site)}: {alt!r}" for page in site_pages(site) for alt in resources(page).alts
           if not (alt or "").strip() or alt == NBCONVERT_DEFAULT_ALT]
    assert not bad, "\n".join(bad)
    plots = sum(len(resources(p).alts) for p in site_pages(site))
    assert plots >= 10  # the lessons' plots are among them


def _notebook_with_plot(root: Path, source: str) -> None:
    (root / "notebooks").mkdir(parents=True, exist_ok=True)
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="})]
    notebook.cells = [nbformat.v4.new_markdown_cell("# One"), cell]
    nbformat.write(notebook, root / "notebooks" / "01_one.ipynb")


def _alts(page: Path) -> list[str | None]:
    return resources(page).alts


def test_a_plot_with_nothing_to_describe_it_fails_the_build(tmp_path: Path) -> None:
    _notebook_with_plot(tmp_path, "show(figure)")
    built = build_html.build(tmp_path / "out", root=tmp_path)
    assert len(built.undescribed) == 1 and "cell 1" in built.undescribed[0] and "# alt:" in built.undescribed[0]


def test_an_alt_comment_is_the_alt_text(tmp_path: Path) -> None:
    _notebook_with_plot(tmp_path, "# alt: runtime against n, flat then rising\nshow(figure)")
    built = build_html.build(tmp_path / "out", root=tmp_path)
    assert not built.undescribed
    assert _alts(tmp_path / "out" / "notebooks" / "01_one.html") == ["runtime against n, flat then rising"]


def test_the_alt_text_comes_from_the_plotting_function_the_cell_calls(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("from .drawing import plot_trips as plot_trips\n")
    (tmp_path / "lib" / "drawing.py").write_text(
        'def plot_trips(ledger, title=None):\n'
        '    """Trips per launch, one bar per array.\n\n    More detail that is not needed."""\n'
        '    ax.set_xlabel("trips")\n    ax.set_title(title or "default title")\n')
    _notebook_with_plot(tmp_path, '# NBVAL_IGNORE_OUTPUT\nfrom lib import plot_trips\n_ = plot_trips(x, title="three or one")')
    built = build_html.build(tmp_path / "out", root=tmp_path)
    assert not built.undescribed
    assert _alts(tmp_path / "out" / "notebooks" / "01_one.html") == [
        "Plot: Trips per launch, one bar per array; x axis: trips; title: three or one."]


def test_a_mermaid_diagram_is_reported(tmp_path: Path) -> None:
    _markdown_notebook(tmp_path / "notebooks" / "01_one.ipynb", "# One\n\n```mermaid\ngraph LR; a-->b\n```")
    built = build_html.build(tmp_path / "out", root=tmp_path)
    assert any("mermaid" in problem for problem in built.undescribed), built.undescribed
