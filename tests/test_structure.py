"""The shape of helpers/: no import cycles, no hidden imports, no project jargon where learners look."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "helpers"
sys.path.insert(0, str(ROOT / "scripts"))
from import_graph import find_cycle, imports, module_name, package_edges  # noqa: E402

# How this project talks about its own work, never to a learner: "the design card", performance
# "bars" and "targets", "the issue", issue numbers.  (Bars in a bar chart are fine.)
JARGON = re.compile(r"design card|performance (?:bars?|targets?)|\bbars? (?:of|met|pass|fail)|\btargets? met\b"
                    r"|\bthe issue\b|\bissue\s*#?\d", re.IGNORECASE)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_helpers_has_no_import_cycle_counting_imports_inside_functions():
    assert find_cycle(package_edges()) is None


def test_no_import_between_helpers_modules_inside_a_function_without_a_reason():
    hidden = []
    for module, targets in imports().items():
        for target, node, local, path in targets:
            if local:
                lines = path.read_text().splitlines()
                line, before = lines[node.lineno - 1], lines[node.lineno - 2] if node.lineno > 1 else ""
                if "#" not in line and not before.strip().startswith("#"):
                    hidden.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {target}")
    assert not hidden, "imports inside functions need a one-line comment saying why:\n" + "\n".join(hidden)


def test_the_lesson_kit_is_small_and_the_rest_is_grouped():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 16, top
    assert {"counting", "lab", "classroom"} <= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    lab = {module_name(p) for p in (PACKAGE / "lab").glob("*.py")}
    kit = {f"helpers.{m}" for m in top}
    upward = [(m, t) for m in kit for t, *_ in imports()[m] if t.startswith(("helpers.lab", "helpers.classroom"))]
    assert not upward, f"the lesson kit must not depend on the lab or the classroom: {upward}"
    assert lab


def _notebook_text(path: Path) -> list[tuple[str, str]]:
    nb = json.loads(path.read_text())
    out = []
    for i, cell in enumerate(nb["cells"]):
        out.append((f"{path.relative_to(ROOT)} cell {i}", "".join(cell["source"])))
        for o in cell.get("outputs", []):
            out.append((f"{path.relative_to(ROOT)} cell {i} output", json.dumps(o.get("text", o.get("data", {}).get("text/plain", "")))))
    return out


def _helper_strings() -> list[tuple[str, str]]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.value))
    return out


def learner_visible() -> list[tuple[str, str]]:
    texts = _helper_strings()
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        texts += _notebook_text(path)
    return texts


def test_the_jargon_pattern_catches_process_words():
    for text in ("see the design card", "pass/fail performance bars", "the bars of this run", "target met: no",
                 "as the issue says", "issue #12", "Issue 9"):
        assert JARGON.search(text), text
    for text in ("bar charts", "the orange bars", "the barrier", "an issue cost"):
        assert not JARGON.search(text), text


def test_no_project_process_words_where_a_learner_looks():
    found = [f"{where}: {m.group(0)!r}" for where, text in learner_visible() if (m := JARGON.search(text))]
    assert not found, "\n".join(found)


def test_the_architecture_drawing_is_drawn_from_the_code():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_graph.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
