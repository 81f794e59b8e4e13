"""The lesson notebooks in a real browser: JupyterLab, driven by Debian's headless Chromium.

For every ``notebooks/[0-9]*.ipynb`` the test opens the notebook in JupyterLab,
runs all cells from the Run menu (the simulator, when there is no GPU), and checks
what a reader would see:

* no cell shows an error, and every code cell ran;
* every cell that always draws a plot (a plotting call at the top level of the cell)
  shows an image; cells that plot only on some backends (inside an ``if``) are not
  required to;
* every image the kernel sent is on the page as a decoded image.

A screenshot of each notebook (and of each plot) is saved under
``artifacts/screenshots/`` (git-ignored) to look at.

The HTML edition (``make html``) is opened too, from files, with every request that
is not for a local file refused: on each lesson page with display math, MathJax
(shipped with the site) must have typeset every formula, with its web fonts, and no
raw ``$$`` TeX may remain; every image must carry a real alt text.

The server runs from this Python environment on a free loopback port with a
random token, on a temporary copy of ``notebooks/`` (running cells saves outputs,
and the repository's notebooks must not change).  Server and browser are stopped
even when a check fails.  Without Chromium or Playwright the test is skipped and
says why; ``.ci/run`` installs both.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import nbformat
import pytest
from lab_support import LabServer, free_port, isolated_jupyter_env, new_token, start_lab

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
RUN_TIMEOUT_S = 300  # one notebook, all cells, in the simulator (they are meant to take <= 60 s)
JUPYTER = Path(sys.executable).parent / "jupyter"

# Calls that draw a figure: plt.show(), plt.subplots(), plt.figure(), fig.savefig(), helpers' plot_*().
PYPLOT_CALLS = {"show", "subplots", "figure", "subplot_mosaic"}
PLOT_CALLS = re.compile(r"^(savefig|plot_[a-z0-9_]+)$")
CONDITIONAL = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.FunctionDef, ast.AsyncFunctionDef,
               ast.ClassDef, ast.Match) if hasattr(ast, "Match") else ()

LESSONS = sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))


def _why_skip() -> str | None:
    if not CHROMIUM.exists():
        return (f"{CHROMIUM} not found: install Debian's chromium and chromium-driver packages "
                "(`apt-get install -y chromium chromium-driver`; .ci/run does it)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed in this environment (`make setup` installs the dev extras)"
    if not JUPYTER.exists():
        return f"JupyterLab is not installed in this environment ({JUPYTER} missing; `make setup` installs it)"
    if not LESSONS:
        return "no lesson notebooks (notebooks/[0-9]*.ipynb) to open"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why_skip() is not None, reason=str(_why_skip()))]


# -- what the notebook file says a reader should see -------------------------------------------

def _calls_plot(node: ast.AST) -> bool:
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
        if PLOT_CALLS.match(name) or (name in PYPLOT_CALLS and owner in ("plt", "pyplot")):
            return True
    return False


def plot_cells(notebook: Any) -> list[int]:
    """Indices of the code cells that always draw a plot: a plotting call at the top level of the cell.

    A call inside ``if``/``for``/``try`` may not run on every backend (many cells plot
    measurements only where there are some), so those cells are not required to show
    one; any image they do produce is still checked.
    """
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        if any(not isinstance(stmt, CONDITIONAL) and _calls_plot(stmt) for stmt in tree.body):
            found.append(index)
    return found


# -- the server and the browser ------------------------------------------------------------------

@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab serving a temporary copy of the notebooks, stopped even on failure."""
    home = tmp_path_factory.mktemp("browser")
    served = home / "root"
    served.mkdir()
    shutil.copytree(NOTEBOOKS, served / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    if (ROOT / "results").exists():  # markdown may show committed plots by relative path
        (served / "results").symlink_to(ROOT / "results")
    env = isolated_jupyter_env(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))  # helpers importable
    port, token = free_port(), new_token()
    command = [
        str(JUPYTER), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={served}",
        "--ServerApp.port_retries=0", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ] + (["--allow-root"] if os.geteuid() == 0 else [])  # CI runs as root
    server = start_lab(command, port=port, token=token, cwd=served, env=env, log=home / "jupyter.log")
    try:
        server.wait_until_serving()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium with a new, empty profile, closed even on failure."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    playwright = sync_playwright().start()
    context = None
    try:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        yield context
    finally:
        if context is not None:
            context.close()
        playwright.stop()


# -- reading JupyterLab's page -----------------------------------------------------------------

CELL_STATE_JS = r"""
() => {
  const cells = [...document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell')];
  return cells.map(cell => {
    const prompt = cell.querySelector('.jp-InputArea .jp-InputPrompt');
    const outputs = [...cell.querySelectorAll('.jp-OutputArea-output')];
    return {
      code: cell.classList.contains('jp-CodeCell'),
      prompt: prompt ? prompt.textContent.trim() : '',
      // JupyterLab renders a traceback like any stderr text; a warning is stderr text too,
      // so an error is stderr text that reads like one.
      errors: outputs.filter(o => o.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr'
                                  && /Traceback \(most recent call last\)|^\w*(Error|Exception)\b/m.test(o.textContent))
                     .map(o => o.textContent.slice(-600)),
      images: [...cell.querySelectorAll('.jp-OutputArea-output img')].map(
                img => ({loaded: img.complete && img.naturalWidth > 0, width: img.naturalWidth})),
    };
  });
}
"""


def cell_states(page: Any) -> list[dict[str, Any]]:
    return page.evaluate(CELL_STATE_JS)


def wait_for_images(page: Any, expected: dict[int, int], timeout: float) -> list[dict[str, Any]]:
    """The cells' state once every cell shows the images it produced, or when the time is up."""
    deadline = time.monotonic() + timeout
    while True:
        states = cell_states(page)
        missing = [i for i, n in expected.items() if sum(img["loaded"] for img in states[i]["images"]) < n]
        if not missing or time.monotonic() > deadline:
            return states
        page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(missing[0]).scroll_into_view_if_needed()
        time.sleep(0.5)


def kernels_idle(lab: LabServer) -> bool:
    """Whether the server has a kernel and every kernel is idle.  A kernel caught mid-start can make the server's
    listing fail (HTTP 500: jupyter_server reads its ``last_activity`` before it is set); that counts as not idle
    yet, and the callers' deadlines still fail a kernel that never settles."""
    status, body = lab.get("/api/kernels")
    if status >= 500:
        return False
    if status >= 400:
        raise RuntimeError(f"GET /api/kernels answered HTTP {status}: {body[:300]!r}")
    kernels = json.loads(body) if body else []
    return bool(kernels) and all(k.get("execution_state") == "idle" for k in kernels)


def wait_until_open(page: Any, cell_count: int, timeout: float) -> None:
    """Wait until JupyterLab shows every cell of the file (it shows one empty cell while loading)."""
    deadline = time.monotonic() + timeout
    shown = 0
    while time.monotonic() < deadline:
        shown = len(cell_states(page))
        if shown == cell_count:
            return
        time.sleep(0.5)
    raise TimeoutError(f"JupyterLab shows {shown} cells after {timeout:.0f} s; the file has {cell_count}")


def wait_for_kernel(lab: LabServer, timeout: float) -> None:
    """Wait until the notebook's kernel has started and is idle."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if kernels_idle(lab):
            return
        time.sleep(0.5)
    status, body = lab.get("/api/kernels")
    raise TimeoutError(f"the kernel was not idle within {timeout:.0f} s: HTTP {status}, {body[:300]!r}")


def menu(page: Any, top: str, item: str) -> None:
    """Click a menu bar entry, then one of its items, by their labels."""
    page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()


def clear_outputs(page: Any) -> None:
    """Edit > Clear Outputs of All Cells: the committed (GPU) outputs go, so a run is seen afresh."""
    menu(page, "Edit", "Clear Outputs of All Cells")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if not any(s["code"] and re.search(r"\d", s["prompt"]) for s in cell_states(page)):
            return
        time.sleep(0.3)
    raise AssertionError("Edit > Clear Outputs of All Cells left execution counts behind")


def run_all_cells(page: Any, lab: LabServer) -> None:
    """Run > Run All Cells, as a reader would, once the kernel is ready; fail if nothing starts."""
    wait_for_kernel(lab, timeout=120)
    clear_outputs(page)
    for _ in range(3):
        menu(page, "Run", "Run All Cells")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if any(s["code"] and re.search(r"[*\d]", s["prompt"]) for s in cell_states(page)):
                return
            time.sleep(0.5)
        page.keyboard.press("Escape")
    raise AssertionError("Run > Run All Cells did not start any cell")


def wait_until_done(page: Any, lab: LabServer, timeout: float) -> list[dict[str, Any]]:
    """Wait until no cell is queued or running and the kernel is idle; return the cells' state."""
    deadline = time.monotonic() + timeout
    settled = 0
    while time.monotonic() < deadline:
        states = cell_states(page)
        code = [s for s in states if s["code"]]
        running = any("*" in s["prompt"] for s in code)
        started = any(re.search(r"\d", s["prompt"]) for s in code)  # a folded input (the set-up cell) shows none
        stopped_by_error = any(s["errors"] for s in code)
        if not running and (started or stopped_by_error) and kernels_idle(lab):
            settled += 1
            if settled >= 2:  # idle twice in a row, a second apart
                return states
        else:
            settled = 0
        time.sleep(1)
    prompts = [s["prompt"] for s in cell_states(page) if s["code"]]
    raise TimeoutError(f"cells still running after {timeout:.0f} s; prompts: {prompts}")


def wait_until_saved(lab: LabServer, path: str, before: str, timeout: float = 30) -> dict[str, Any]:
    """The notebook as JupyterLab saved it after this run: newer than ``before``, with every cell run.

    The committed notebooks carry GPU outputs and execution counts, so a file that merely
    has counts may still be the one on disk before the save.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            model = lab.api("GET", f"{path}?content=1")
        except RuntimeError as busy:  # mid-save (write, then rename) a read answers 404, 400 "Unreadable" or 500
            if not re.search(r"HTTP (404|500)|Unreadable Notebook", str(busy)) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        saved = model["content"]
        counted = sum(c.get("execution_count") is not None for c in saved["cells"] if c["cell_type"] == "code")
        code = sum(c["cell_type"] == "code" for c in saved["cells"])
        fresh = model["last_modified"] != before
        if (fresh and counted == code) or time.monotonic() > deadline:
            assert fresh, "JupyterLab did not save the notebook after the run"
            assert counted == code, f"the saved notebook has {counted} of {code} code cells run"
            return saved
        time.sleep(0.5)


# -- the test ----------------------------------------------------------------------------------

@pytest.mark.parametrize("notebook_path", LESSONS, ids=[p.name for p in LESSONS])
def test_notebook_in_jupyterlab(notebook_path: Path, lab: LabServer, browser_context: Any) -> None:
    notebook = nbformat.read(notebook_path, as_version=4)
    expected_plots = plot_cells(notebook)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = notebook_path.stem
    for stale in SCREENSHOTS.glob(f"{name}*.png"):
        stale.unlink()
    page = browser_context.new_page()
    failed = True
    try:
        page.goto(lab.url(f"/lab/tree/notebooks/{notebook_path.name}?reset"), wait_until="domcontentloaded")
        wait_until_open(page, len(notebook.cells), timeout=90)

        page.keyboard.press("Control+b")  # hide the file browser: more of the notebook on screen
        run_all_cells(page, lab)
        states = wait_until_done(page, lab, RUN_TIMEOUT_S)

        errors = {i: s["errors"] for i, s in enumerate(states) if s["errors"]}
        assert not errors, f"{notebook_path.name}: cells show errors: " + json.dumps(errors, indent=1)[:3000]
        # a folded input shows no prompt at all: the saved notebook's execution counts, checked below, cover it
        unrun = [i for i, s in enumerate(states) if s["code"] and s["prompt"] and not re.search(r"\d", s["prompt"])]
        assert not unrun, f"{notebook_path.name}: cells {unrun} did not run (prompts {[states[i]['prompt'] for i in unrun]})"

        for index in expected_plots:
            assert states[index]["images"], (
                f"{notebook_path.name}: cell {index} always draws a plot, but JupyterLab shows no image for it")
        image_cells = [i for i, state in enumerate(states) if state["images"]]
        for index in image_cells:
            assert all(img["loaded"] for img in states[index]["images"]), f"{notebook_path.name}: an image in cell {index} did not load"

        # Every image the kernel produced (as saved by JupyterLab) is on the page as an image.
        contents = f"/api/contents/notebooks/{notebook_path.name}"
        before = lab.api("GET", f"{contents}?content=0")["last_modified"]
        page.keyboard.press("Control+s")
        saved = wait_until_saved(lab, contents, before)
        sent = {index: sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))
                for index, cell in enumerate(saved["cells"])}
        states = wait_for_images(page, sent, timeout=20)  # an image can still be decoding when the kernel goes idle
        for index, cell in enumerate(saved["cells"]):
            shown = sum(img["loaded"] for img in states[index]["images"])
            assert shown >= sent[index], f"{notebook_path.name}: cell {index} produced {sent[index]} image(s), the page shows {shown}"
            kernel_errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
            assert not kernel_errors, f"{notebook_path.name}: cell {index} raised {kernel_errors[0].get('ename')}"

        page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        for index in image_cells:
            cells.nth(index).locator(".jp-OutputArea").screenshot(path=str(SCREENSHOTS / f"{name}_cell{index:02d}.png"))
        failed = False
    finally:
        if failed:
            try:
                page.screenshot(path=str(SCREENSHOTS / f"{name}_FAILED.png"))
            except Exception:  # the screenshot is a diagnosis aid only
                pass
        page.close()
        lab.shutdown_kernels()


# -- the HTML edition, offline ---------------------------------------------------------------------

DISPLAY_MATH = re.compile(r"\$\$.+?\$\$", re.S)
LOCAL = ("file:", "data:", "about:", "blob:")
NBCONVERT_DEFAULT_ALT = "No description has been provided for this image"


def display_math(path: Path) -> int:
    notebook = nbformat.read(path, as_version=4)
    return sum(len(DISPLAY_MATH.findall(c.source)) for c in notebook.cells if c.cell_type == "markdown")


MATH_LESSONS = [p for p in LESSONS if display_math(p)]

TYPESET_JS = r"""
() => new Promise(done => MathJax.Hub.Queue(() => done({
  displays: document.querySelectorAll('.MathJax_Display').length,
  errors: document.querySelectorAll('.MathJax_Error, merror, .merror').length,
  rawTex: document.body.innerText.includes('$$'),
  font: MathJax.OutputJax['HTML-CSS'] ? MathJax.OutputJax['HTML-CSS'].fontInUse : null,
  alts: [...document.images].map(img => img.getAttribute('alt')),
})))
"""


@pytest.fixture(scope="module")
def html_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML edition as `make html` builds it."""
    spec = importlib.util.spec_from_file_location("build_html", ROOT / "scripts" / "build_html.py")
    build_html = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_html", build_html)  # its dataclasses look their module up
    spec.loader.exec_module(build_html)
    out = tmp_path_factory.mktemp("html")
    built = build_html.build(out)
    assert not built.broken and not built.undescribed, built.broken + built.undescribed
    return out


@pytest.mark.parametrize("notebook_path", MATH_LESSONS, ids=[p.name for p in MATH_LESSONS])
def test_html_page_renders_its_math_with_no_network(notebook_path: Path, html_site: Path, browser_context: Any) -> None:
    remote: list[str] = []

    def only_local(route: Any) -> None:
        if route.request.url.startswith(LOCAL):
            route.continue_()
        else:
            remote.append(route.request.url)
            route.abort()

    page = browser_context.new_page()
    try:
        page.route("**/*", only_local)
        page.goto((html_site / notebook_path.relative_to(ROOT)).with_suffix(".html").as_uri(), wait_until="load")
        try:
            page.wait_for_function("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue", timeout=30_000)
        except Exception as error:  # playwright's TimeoutError: say what the page lacked
            raise AssertionError(f"{notebook_path.name}: MathJax did not load offline (refused: {remote})") from error
        state = page.evaluate(TYPESET_JS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.locator(".MathJax_Display").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / f"html_{notebook_path.stem}.png"))
    finally:
        page.close()
    assert not remote, f"{notebook_path.name}: the page asked the network for {remote}"
    assert state["displays"] >= display_math(notebook_path), (notebook_path.name, state)
    assert not state["errors"] and not state["rawTex"], (notebook_path.name, state)
    assert state["font"] == "STIX-Web", f"{notebook_path.name}: MathJax used {state['font']!r}, not its web fonts"
    bad_alts = [alt for alt in state["alts"] if not (alt or "").strip() or alt == NBCONVERT_DEFAULT_ALT]
    assert not bad_alts, f"{notebook_path.name}: images without a real alt text: {bad_alts}"
