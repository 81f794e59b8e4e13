"""The shape of helpers/: no import cycles, no hidden imports, no project jargon where learners look."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "helpers"
sys.path.insert(0, str(ROOT / "scripts"))
from import_graph import find_cycle, imports, lesson_facts, lesson_folders, package_edges  # noqa: E402

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


KIT_LAYERS = ("helpers.counting", "helpers.lessons", "helpers.harness", "helpers.classroom")
LESSON_PARTS = ("__init__.py", "__main__.py", "record.py", "measure.py", "report.py")


def _layer(module: str) -> str:
    return next((layer for layer in KIT_LAYERS if module == layer or module.startswith(layer + ".")), "helpers")


def test_imports_point_down_the_layers():
    """kit and counting know no lesson, harness or classroom; the harness knows no lesson; lessons know no classroom."""
    forbidden = {"helpers": KIT_LAYERS[1:], "helpers.counting": KIT_LAYERS[1:],
                 "helpers.harness": ("helpers.lessons", "helpers.classroom"),
                 "helpers.lessons": ("helpers.classroom",), "helpers.classroom": ("helpers.lessons", "helpers.harness")}
    wrong = [(m, t) for m, targets in imports().items() for t, *_ in targets
             if _layer(t) in forbidden[_layer(m)]]
    assert not wrong, f"imports against the layers: {wrong}"


def lesson_problems(folder: Path) -> list[str]:
    """What a lesson folder lacks of the convention (docs/architecture.md, "Adding a lesson")."""
    problems = [f"{folder.name}: no {part}" for part in LESSON_PARTS if not (folder / part).is_file()]
    if problems:
        return problems
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    if not re.match(r"Lesson \d\d", doc):
        problems.append(f"{folder.name}/__init__.py: its docstring does not start with 'Lesson NN'")
    facts = lesson_facts(folder)
    for name in ("NOTEBOOKS", "GPU_STEPS", "RESULTS"):
        if name not in facts:
            problems.append(f"{folder.name}/__init__.py: no {name} tuple")
    problems += [f"{folder.name}: no notebook {n}" for n in facts.get("NOTEBOOKS", ())
                 if not (ROOT / "notebooks" / f"{n}.ipynb").is_file()]
    problems += [f"{folder.name}: no GPU step {s}" for s in facts.get("GPU_STEPS", ())
                 if not (ROOT / "scripts" / "gpu" / f"{s}.sh").is_file()]
    problems += [f"{folder.name}: no committed result {r}" for r in facts.get("RESULTS", ())
                 if not (ROOT / "results" / "h200" / f"{r}.json").is_file()]
    main = ast.parse((folder / "__main__.py").read_text()).body
    calls = [n for n in main if not isinstance(n, (ast.Import, ast.ImportFrom))
             and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if len(calls) != 1 or "run(__package__" not in ast.unparse(calls[0]):
        problems.append(f"{folder.name}/__main__.py: its body is not the one line `run(__package__, COMMANDS)`")
    record = ast.parse((folder / "record.py").read_text())
    if not any(isinstance(n, ast.ClassDef) and any("Record" in ast.unparse(b) for b in n.bases) for n in record.body):
        problems.append(f"{folder.name}/record.py: defines no Record")
    return problems


def test_every_lesson_folder_has_the_same_parts():
    folders = lesson_folders()
    assert folders
    problems = [p for folder in folders for p in lesson_problems(folder)]
    assert not problems, "\n".join(problems)


def test_a_lesson_folder_copied_from_another_passes_the_convention(tmp_path):
    copy = tmp_path / "my_lesson"
    shutil.copytree(lesson_folders()[-1], copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert lesson_problems(copy) == []
    (copy / "report.py").unlink()
    assert lesson_problems(copy) == ["my_lesson: no report.py"]


def test_every_notebook_result_and_gpu_step_belongs_to_a_lesson():
    claimed = {kind: {x for f in lesson_folders() for x in lesson_facts(f).get(kind, ())}
               for kind in ("NOTEBOOKS", "GPU_STEPS", "RESULTS")}
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    steps = {p.stem for p in (ROOT / "scripts" / "gpu").glob("[0-9][0-9]_*.sh")}
    assert notebooks - claimed["NOTEBOOKS"] <= {"01_three_kernels"}  # the chapter's pipeline is the kit's
    assert steps == claimed["GPU_STEPS"]


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
