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

The pages work offline: MathJax comes from the ``jupyter-server-mathjax`` package and
is copied into ``_static/mathjax/``; nothing is loaded from a CDN (require.js and
mermaid, which nbconvert's template would fetch, are left out: no notebook uses them,
and a mermaid diagram in a notebook is reported).  Every plot carries an alt text
derived from its cell (see ``describe_plot``).  The solutions are left out unless
``--solutions`` is given: publish them only after the session.
"""

from __future__ import annotations

import argparse
import ast
import html
import importlib.util
import os
import re
import shutil
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import nbformat
from jinja2 import DictLoader
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

# -- offline pages ----------------------------------------------------------------------------
# MathJax 2 (what nbconvert's template is written for) from a pip package; its "-full" config
# with the Safe extension, as JupyterLab and nbconvert use it. The package ships the STIX web
# fonts only (not MathJax's default TeX fonts), so the pages ask for those.
MATHJAX_PACKAGE = "jupyter_server_mathjax"
MATHJAX_PIN = "jupyter-server-mathjax==0.2.6"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"
STATIC_MATHJAX = PurePosixPath("_static/mathjax")
SITE_MATHJAX = "site-static:mathjax"  # stands for MathJax's address until the page's links are rewritten
# nbconvert's "lab" page, with nothing fetched from a CDN, and an alt text on every image.
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script>window.MathJax = {"HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null}};</script>
{{ super() }}
{%- endblock html_head_js_mathjax -%}
{% block data_png scoped %}
{{ super() | replace('<img ', '<img alt="' ~ (output.metadata.get('alt', '') | escape_html) ~ '" ', 1) }}
{% endblock data_png %}
{% block data_jpg scoped %}
{{ super() | replace('<img ', '<img alt="' ~ (output.metadata.get('alt', '') | escape_html) ~ '" ', 1) }}
{% endblock data_jpg %}
"""
MERMAID = re.compile(r"^```mermaid\b", re.M)
REMOTE_IMAGE = re.compile(r'<img\b[^>]*\bsrc="(?:https?:)?//[^"]*"[^>]*>', re.I)
ALT = re.compile(r'\balt="([^"]*)"', re.I)


def offline_badges(document: str) -> str:
    """Remote images (the Colab and Binder badges) become their alt text: a page fetches nothing."""
    def text(match: re.Match[str]) -> str:
        alt = ALT.search(match.group(0))
        return f'<span class="badge">{alt.group(1) if alt else "image"}</span>'

    return REMOTE_IMAGE.sub(text, document)


class MissingDependency(RuntimeError):
    """A package the build needs is not installed; the message says which, and how to install it."""


def mathjax_files() -> Path:
    """The MathJax distribution that ``jupyter-server-mathjax`` installs (its ``static`` folder)."""
    spec = importlib.util.find_spec(MATHJAX_PACKAGE)
    folder = Path(next(iter(spec.submodule_search_locations))) / "static" if spec and spec.submodule_search_locations else None
    if folder is None or not (folder / "MathJax.js").is_file():
        raise MissingDependency(f"the offline pages need MathJax from the {MATHJAX_PACKAGE} package, which is not installed: "
                         f"pip install '{MATHJAX_PIN}' (`make setup` installs it)")
    return folder


def offline_exporter(mathjax_href: str) -> HTMLExporter:
    return HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"offline.html.j2": OFFLINE_TEMPLATE})],
                        template_file="offline.html.j2", mathjax_url=f"{mathjax_href}?config={MATHJAX_CONFIG}")


# -- alt text for plots ------------------------------------------------------------------------
# A plot's alt text comes from its cell: a `# alt: ...` line when the author wrote one;
# otherwise the kind of chart, the first paragraph of the docstring of each helpers
# plotting function the cell calls, the cell's own comments, and the titles and axis
# labels written as plain strings (in the cell, or in those functions).
ALT_COMMENT = re.compile(r"^\s*#\s*alt:\s*(.+?)\s*$", re.M)
TEST_MARKER = re.compile(r"^\s*#\s*NBVAL_\w+\s*$")
LABEL_CALLS = {"set_title": "title", "title": "title", "suptitle": "title",
               "set_xlabel": "x axis", "xlabel": "x axis", "set_ylabel": "y axis", "ylabel": "y axis"}
CHART_KINDS = {"barh": "horizontal bar chart", "bar": "bar chart", "scatter": "dot plot", "plot": "line plot",
               "loglog": "line plot on log-log axes", "hist": "histogram", "imshow": "image"}
PLOT_FUNCTION = re.compile(r"^(plot|draw)_\w+$")


def _parse(source: str) -> ast.Module | None:
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def _call_name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _strings(node: ast.AST) -> list[str]:
    """The plain strings an argument can be (``title or "default"`` gives ``default``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
        return [" ".join(node.value.split())]
    if isinstance(node, ast.BoolOp):
        return [s for value in node.values for s in _strings(value)]
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    return []


def _labels(tree: ast.AST) -> list[str]:
    """Titles and axis labels written as plain strings: ``ax.set_xlabel("n")``, ``plot_x(..., title="t")``."""
    found = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        what = LABEL_CALLS.get(_call_name(call))
        values = [(what, a) for a in call.args[:1]] if what else []
        if PLOT_FUNCTION.match(_call_name(call)):  # a title given to a plotting function (not a legend's)
            values += [("title", k.value) for k in call.keywords if k.arg == "title"]
        found += [f"{label}: {text}" for label, node in values for text in _strings(node)]
    return found


def _chart_kind(tree: ast.AST) -> list[str]:
    calls = [_call_name(n) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    return [CHART_KINDS[name] for name in calls if name in CHART_KINDS][:1]


def notebook_imports(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """Local name -> dotted path, from the notebook's absolute imports (``sp`` -> ``helpers.lessons.sweep.report``)."""
    names: dict[str, str] = {}
    for cell in notebook.cells:
        tree = _parse(cell.source) if cell.cell_type == "code" else None
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Import):
                names.update({a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in node.names})
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return names


def find_function(root: Path, dotted: str, depth: int = 3) -> ast.FunctionDef | None:
    """The definition of ``package.module.function`` among the project's files, following re-exports."""
    parts = dotted.split(".")
    module, name = parts[:-1], parts[-1]
    candidates = [root.joinpath(*module).with_suffix(".py"), root.joinpath(*module, "__init__.py")] if module else []
    source = next((c for c in candidates if c.is_file()), None)
    if source is None or depth == 0:
        return None
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            original = next(a.name for a in node.names if (a.asname or a.name) == name)
            package = module if source.name == "__init__.py" else module[:-1]
            base = package[: len(package) - (node.level - 1)] if node.level else []
            return find_function(root, ".".join([*base, *(node.module or "").split("."), original]).strip("."), depth - 1)
    return None


def _called_plot_functions(tree: ast.AST, imports: dict[str, str]) -> list[str]:
    dotted = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and PLOT_FUNCTION.match(_call_name(n))):
        func = call.func
        if isinstance(func, ast.Name) and func.id in imports:
            dotted.append(imports[func.id])
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in imports:
            dotted.append(f"{imports[func.value.id]}.{func.attr}")
    return dotted


def describe_plot(source: str, imports: dict[str, str], root: Path) -> str | None:
    """The alt text for the plot a code cell draws, or None when the cell says nothing about it."""
    written = ALT_COMMENT.findall(source)
    if written:
        return " ".join(written)
    tree = _parse(source)
    if tree is None:
        return None
    own = _labels(tree)
    parts = []
    for dotted in _called_plot_functions(tree, imports):
        function = find_function(root, dotted)
        if function is not None:
            parts += [_summary(function)]
            # a title the cell passes replaces the function's default one
            parts += [l for l in _labels(function) if not (l.startswith("title:") and any(o.startswith("title:") for o in own))]
    parts += [line.strip().lstrip("#").strip() for line in source.splitlines()
              if line.strip().startswith("#") and not TEST_MARKER.match(line) and line.strip("# \t")]
    parts = list(dict.fromkeys(p.rstrip(".") for p in parts + own if p))
    if not parts:
        return None
    return f"{(_chart_kind(tree) or ['plot'])[0].capitalize()}: {'; '.join(parts)}."


def _summary(function: ast.FunctionDef) -> str:
    """The first sentence of a function's docstring, as plain text."""
    doc = " ".join((ast.get_docstring(function) or "").split("\n\n")[0].split()).replace("``", "")
    return re.sub(r";\s*returns\b.*$", "", re.split(r"(?<=\.)\s", doc, maxsplit=1)[0]).strip()


def describe_plots(notebook: nbformat.NotebookNode, root: Path) -> list[int]:
    """Give every image output its cell's alt text (in ``output.metadata["alt"]``); return cells with none."""
    imports, undescribed = notebook_imports(notebook), []
    for index, cell in enumerate(notebook.cells):
        images = [o for o in cell.get("outputs", []) if {"image/png", "image/jpeg"} & set(o.get("data", {}))]
        if not images:
            continue
        alt = describe_plot(cell.source, imports, root)
        if alt is None:
            undescribed.append(index)
            continue
        for number, output in enumerate(images, 1):
            output.setdefault("metadata", {})["alt"] = alt if len(images) == 1 else f"{alt} (figure {number} of {len(images)})"
    return undescribed


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
    with_solutions: bool = False
    broken: list[str] = field(default_factory=list)
    undescribed: list[str] = field(default_factory=list)  # plots without an alt text, and what else cannot be shown offline
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
        name = source.relative_to(self.root)
        self.undescribed += [f"{name}: cell {i} shows a plot with no description; add a line `# alt: <what the plot shows>`"
                             " to the cell" for i in describe_plots(notebook, self.root)]
        self.undescribed += [f"{name}: cell {i} has a mermaid diagram, which the offline pages cannot draw"
                             for i, c in enumerate(notebook.cells) if c.cell_type == "markdown" and MERMAID.search(c.source)]
        page = self.page_path(source)
        exporter = offline_exporter(SITE_MATHJAX)
        body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": f"{title} · {SERIES_TITLE}"}})
        body = self.rewrite_links(body, source, page)  # before the site's own links (MathJax, the nav bars)
        body = body.replace(SITE_MATHJAX, html.escape(self.href(self.out / STATIC_MATHJAX / "MathJax.js", page)), 1)
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
        page.write_text(offline_badges(text))

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
            if not self.with_solutions and target in solutions(self.root):
                self.broken.append(f"{source.relative_to(self.root)}: {value!r} is a solution, which this edition "
                                   "leaves out (build with --solutions to publish them)")
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
                         f'alt="{html.escape(self.headline_alt())}" style="max-width:100%"></p>')
        parts.append('<h2 id="lessons">Lessons</h2>\n<ol class="lessons">')
        for path in lessons(self.root):
            parts.append(self.index_entry(path, index))
        parts.append("</ol>")
        student = exercises(self.root)
        answers = {p.name.replace("__SOLUTION", ""): p for p in solutions(self.root)} if self.with_solutions else {}
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

    def headline_alt(self) -> str:
        """The README's alt text for the headline plot (the index shows the same picture)."""
        readme = self.root / "README.md"
        text = readme.read_text() if readme.exists() else ""
        found = re.search(r"!\[([^\]]+)\]\(" + re.escape(HEADLINE_PLOT) + r"\)", text)
        if found is None:
            self.undescribed.append(f"README.md shows {HEADLINE_PLOT} without an alt text: the index needs one")
            return ""
        return found[1]

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


def build(out: Path = DEFAULT_OUT, root: Path = ROOT, with_solutions: bool = False) -> Site:
    """Build the site into ``out`` (emptied first) and return it.

    ``site.broken`` lists bad links, ``site.undescribed`` plots without an alt text (and
    diagrams the offline pages cannot draw); the solutions are left out unless ``with_solutions``.
    """
    root = root.resolve()
    mathjax = mathjax_files()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copytree(mathjax, out / STATIC_MATHJAX)
    site = Site(root=root, out=out.resolve(), with_solutions=with_solutions)
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
    parser.add_argument("--solutions", action="store_true",
                        help="publish the exercises' solutions too (left out by default: publish them after the session)")
    args = parser.parse_args(argv)
    try:
        site = build(args.out, with_solutions=args.solutions)
    except MissingDependency as missing:
        print(missing, file=sys.stderr)
        return 1
    pages = [p for p in site.out.rglob("*.html") if STATIC_MATHJAX.parts[0] not in p.relative_to(site.out).parts]
    print(f"built {len(pages)} pages under {args.out} (open {args.out / 'index.html'})")
    unexecuted = [p.name for p in lessons() if not has_outputs(nbformat.read(p, as_version=4))]
    if unexecuted:
        print(f"note: {len(unexecuted)} lesson(s) have no committed outputs yet: {', '.join(unexecuted)}")
    if not args.solutions:
        print("the solutions are left out (--solutions publishes them)")
    if site.broken:
        print("broken links:\n  " + "\n  ".join(site.broken), file=sys.stderr)
    if site.undescribed:
        print("cannot be shown as it should:\n  " + "\n  ".join(site.undescribed), file=sys.stderr)
    return 1 if site.broken or site.undescribed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
