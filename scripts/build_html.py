"""Build the readable HTML edition of the series: the committed notebooks, outputs as committed.

    python scripts/build_html.py [--out build/html]      (or: make html)

Nothing is executed: the lesson notebooks are committed with the outputs of a
run on a real GPU, and those outputs (plots inline) are what the site shows.
The site mirrors the repository's paths under ``--out``:

* ``index.html``: the lessons in series order, then the exercises;
* ``notebooks/NN_name.html`` for every lesson, exercise and solution, with links
  to the previous and next lesson;
* any other repository file a page links to (a plot under ``results/``, a
  markdown page such as ``docs/teaching.md``, rendered to HTML) is brought along, so
  every local link resolves.  Links to ``.ipynb`` and ``.md`` files are rewritten to
  their ``.html`` pages, and a link to ``notebooks/`` or ``notebooks/exercises/`` to its
  section of the index.

A link to a file that does not exist is reported and makes the build fail.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import nbformat
from nbconvert import HTMLExporter
from nbconvert.filters import markdown2html_mistune

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "html"
SERIES_TITLE = "Three kernels or one"
HEADLINE_PLOT = "results/h200/headline.png"

# Links to these folders go to their section of the index.
FOLDER_SECTIONS = {"notebooks": "#lessons", "notebooks/exercises": "#exercises"}
# href="..." / src="..." in the rendered pages (values are HTML-escaped, without raw quotes).
LINK = re.compile(r'\b(href|src)="([^"]*)"')
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//|#)")


def lessons(root: Path = ROOT) -> list[Path]:
    """The lesson notebooks in series order (``notebooks/NN_name.ipynb``)."""
    return sorted((root / "notebooks").glob("[0-9]*.ipynb"))


def exercises(root: Path = ROOT) -> list[Path]:
    """Student exercise notebooks (``notebooks/exercises/*.ipynb``)."""
    return sorted((root / "notebooks" / "exercises").glob("[0-9]*.ipynb"))


def solutions(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks" / "exercises" / "solutions").glob("[0-9]*.ipynb"))


def title_of(notebook: nbformat.NotebookNode, fallback: str) -> str:
    """The first markdown heading of a notebook, without the ``#`` marks."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return fallback


def backend_banner(notebook: nbformat.NotebookNode) -> str | None:
    """The ``backend: ...`` line a notebook printed when it was executed, if it was."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            for line in text.splitlines() if isinstance(text, str) else []:
                if line.startswith("backend:"):
                    return line.strip()
    return None


def has_outputs(notebook: nbformat.NotebookNode) -> bool:
    return any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")


@dataclass
class Site:
    """Renders pages into ``out``; follows local links and brings their targets along."""

    root: Path
    out: Path
    broken: list[str] = field(default_factory=list)
    done: set[Path] = field(default_factory=set)
    pending: list[Path] = field(default_factory=list)
    nav: dict[Path, tuple[Path | None, Path | None]] = field(default_factory=dict)

    def page_path(self, source: Path) -> Path:
        """Where a repository file lands in the site (``.ipynb`` and ``.md`` become ``.html``)."""
        relative = source.relative_to(self.root)
        if source.suffix in (".ipynb", ".md"):
            relative = relative.with_suffix(".html")
        return self.out / relative

    def href(self, target: Path, page: Path) -> str:
        """A relative URL from site page ``page`` to site file ``target``."""
        return urllib.parse.quote(str(PurePosixPath(Path(_relpath(target, page.parent)))))

    def add(self, source: Path) -> None:
        source = source.resolve()
        if source not in self.done and source not in self.pending:
            self.pending.append(source)

    def build(self) -> None:
        while self.pending:
            source = self.pending.pop(0)
            self.done.add(source)
            if source.suffix == ".ipynb":
                self.render_notebook(source)
            elif source.suffix == ".md":
                self.render_markdown(source)
            else:
                target = self.page_path(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)

    # -- pages -------------------------------------------------------------------------------

    def render_notebook(self, source: Path) -> None:
        notebook = nbformat.read(source, as_version=4)
        title = title_of(notebook, source.stem)
        exporter = HTMLExporter(template_name="lab")
        body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": f"{title} · {SERIES_TITLE}"}})
        page = self.page_path(source)
        body = self.rewrite_links(body, source, page)  # before the nav bars, whose links are the site's own
        body = _insert_after_body(body, self.nav_bar(source, page))
        body = body.replace("</body>", self.nav_bar(source, page) + "</body>", 1)
        self.write(page, body)

    def render_markdown(self, source: Path) -> None:
        text = source.read_text()
        title = next((l.lstrip("#").strip() for l in text.splitlines() if l.startswith("#")), source.stem)
        page = self.page_path(source)
        body = self.rewrite_links(markdown2html_mistune(text), source, page)
        home = html.escape(self.href(self.out / "index.html", page))
        self.write(page, _page(title, f'<nav class="series-nav"><a href="{home}">{SERIES_TITLE}: contents</a></nav>\n{body}'))

    def nav_bar(self, source: Path, page: Path) -> str:
        """Links to the index and to the neighbouring lessons."""
        previous, following = self.nav.get(source, (None, None))
        parts = [f'<a href="{html.escape(self.href(self.out / "index.html", page))}">contents</a>']
        if previous is not None:
            parts.insert(0, f'<a href="{html.escape(self.href(self.page_path(previous), page))}">&larr; previous</a>')
        if following is not None:
            parts.append(f'<a href="{html.escape(self.href(self.page_path(following), page))}">next &rarr;</a>')
        return (f'<nav class="series-nav" style="margin:1em 2em;font-family:sans-serif">'
                f'{" &middot; ".join(parts)}</nav>\n')

    def write(self, page: Path, text: str) -> None:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text)

    # -- links -------------------------------------------------------------------------------

    def rewrite_links(self, document: str, source: Path, page: Path) -> str:
        """Point local links at the site's copies, queue their targets, record broken ones."""

        def replace(match: re.Match[str]) -> str:
            attribute, value = match.group(1), html.unescape(match.group(2))
            if not value or EXTERNAL.match(value):
                return match.group(0)
            path_part, _, fragment = value.partition("#")
            path_part = path_part.split("?", 1)[0]
            if path_part.startswith("/"):
                self.broken.append(f"{source.relative_to(self.root)}: absolute link {value!r}")
                return match.group(0)
            target = (source.parent / urllib.parse.unquote(path_part)).resolve()
            if target.is_dir() and _inside(target, self.root):
                folder = target.relative_to(self.root).as_posix()
                if folder in FOLDER_SECTIONS:  # a folder of notebooks: its section of the index
                    return f'{attribute}="{html.escape(self.href(self.out / "index.html", page) + FOLDER_SECTIONS[folder])}"'
                if (target / "README.md").exists():
                    target = target / "README.md"
            if not target.is_file() or not _inside(target, self.root):
                self.broken.append(f"{source.relative_to(self.root)}: {value!r} does not resolve to a file of the project")
                return match.group(0)
            self.add(target)
            new = self.href(self.page_path(target), page) + (f"#{fragment}" if fragment else "")
            return f'{attribute}="{html.escape(new)}"'

        return LINK.sub(replace, document)

    # -- the index ---------------------------------------------------------------------------

    def write_index(self) -> None:
        index = self.out / "index.html"
        parts = [f"<h1>{SERIES_TITLE}</h1>",
                 "<p>Why fused GPU kernels are fast, in Python with Numba-CUDA: <code>out = (a + b) * c / s</code> "
                 "as three kernels against one. These pages show the notebooks as committed, with the outputs "
                 "of the run named under each title.</p>"]
        headline = self.root / HEADLINE_PLOT
        if headline.exists():
            self.add(headline)
            parts.append(f'<p><img src="{html.escape(self.href(self.page_path(headline), index))}" '
                         f'alt="headline plot" style="max-width:100%"></p>')
        parts.append('<h2 id="lessons">Lessons</h2>\n<ol class="lessons">')
        for path in lessons(self.root):
            parts.append(self.index_entry(path, index))
        parts.append("</ol>")
        student, answers = exercises(self.root), {p.name.replace("__SOLUTION", ""): p for p in solutions(self.root)}
        if student:
            parts.append('<h2 id="exercises">Exercises</h2>\n<ol class="exercises">')
            for path in student:
                notebook = nbformat.read(path, as_version=4)
                link = html.escape(self.href(self.page_path(path.resolve()), index))
                entry = f'<li><a href="{link}">{html.escape(title_of(notebook, path.stem))}</a>'
                answer = answers.get(path.name)
                if answer is not None:
                    self.add(answer)
                    entry += f' (<a href="{html.escape(self.href(self.page_path(answer.resolve()), index))}">solution</a>)'
                parts.append(entry + "</li>")
                self.add(path)
            parts.append("</ol>")
        for extra, label in (("README.md", "About the project (README)"), ("docs/teaching.md", "Teaching with this series")):
            if (self.root / extra).exists():
                self.add(self.root / extra)
                parts.append(f'<p><a href="{html.escape(self.href(self.page_path((self.root / extra).resolve()), index))}">{label}</a></p>')
        self.write(index, _page(SERIES_TITLE, "\n".join(parts)))

    def index_entry(self, path: Path, index: Path) -> str:
        notebook = nbformat.read(path, as_version=4)
        link = html.escape(self.href(self.page_path(path.resolve()), index))
        banner = backend_banner(notebook)
        if banner:
            note = f"outputs from {html.escape(banner)}"
        elif has_outputs(notebook):
            note = "outputs committed, backend not recorded"
        else:
            note = "not executed yet: code only, no outputs"
        return f'<li><a href="{link}">{html.escape(title_of(notebook, path.stem))}</a> <small>({note})</small></li>'


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _relpath(target: Path, start: Path) -> str:
    return os.path.relpath(target, start)


def _insert_after_body(document: str, fragment: str) -> str:
    match = re.search(r"<body[^>]*>", document)
    if match is None:
        return fragment + document
    return document[: match.end()] + "\n" + fragment + document[match.end():]


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n"
        "<style>body{font-family:system-ui,sans-serif;max-width:52em;margin:2em auto;padding:0 1em;line-height:1.5}"
        "code,pre{background:#f4f4f4}pre{padding:.6em;overflow-x:auto}img{max-width:100%}</style>\n"
        f"</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def build(out: Path = DEFAULT_OUT, root: Path = ROOT) -> Site:
    """Build the site into ``out`` (emptied first) and return it; ``site.broken`` lists bad links."""
    root = root.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    site = Site(root=root, out=out.resolve())
    series = [p.resolve() for p in lessons(root)]
    for i, path in enumerate(series):
        site.nav[path] = (series[i - 1] if i > 0 else None, series[i + 1] if i + 1 < len(series) else None)
        site.add(path)
    site.write_index()
    site.build()
    return site


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Build the HTML edition of the notebooks (no execution).")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (emptied first)")
    args = parser.parse_args(argv)
    site = build(args.out)
    pages = sorted(p.relative_to(site.out) for p in site.out.rglob("*.html"))
    print(f"built {len(pages)} pages under {args.out} (open {args.out / 'index.html'})")
    unexecuted = [p.name for p in lessons() if not has_outputs(nbformat.read(p, as_version=4))]
    if unexecuted:
        print(f"note: {len(unexecuted)} lesson(s) have no committed outputs yet: {', '.join(unexecuted)}")
    if site.broken:
        print("broken links:\n  " + "\n  ".join(site.broken), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
