"""The import graph of ``helpers`` and the lesson map, read from the code, drawn in docs/architecture.md.

    python scripts/import_graph.py           # rewrite the drawing and the map in docs/architecture.md
    python scripts/import_graph.py --check   # exit 1 if either is out of date

The drawing has one box per kit module and per harness module, one per lesson folder, and
one each for ``counting`` and ``classroom``; every import between two boxes is an arrow.
The map reads each lesson folder's ``NOTEBOOKS``, ``GPU_STEPS`` and ``RESULTS``.

Imports inside functions count too.  ``tests/test_structure.py`` uses the same
functions to forbid cycles and hidden imports, and keeps the drawing up to date.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from regenerate import regenerate

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "helpers"
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- import-graph:start -->", "<!-- import-graph:end -->"
MAP_START, MAP_END = "<!-- lesson-map:start -->", "<!-- lesson-map:end -->"
LESSONS = PACKAGE / "lessons"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(module: str, path: Path, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The helpers modules one import statement names (``from . import x`` names ``pkg.x``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("helpers")]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if node.level:
        base = package[: len(package) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("helpers"):
        return []
    return [target] + [f"{target}.{a.name}" for a in node.names]


def imports() -> dict[str, list[tuple[str, ast.AST, bool, Path]]]:
    """module -> (imported helpers module, node, inside a function?, file)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, list[tuple[str, ast.AST, bool, Path]]] = {m: [] for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in resolve(module, path, node):
                    if target in modules and target != module:
                        graph[module].append((target, node, id(node) in local, path))
    return graph


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def package_edges() -> dict[str, set[str]]:
    """Module-to-module imports; a package's own ``__init__`` is left out (importing any submodule runs it)."""
    return {m: {t for t, *_ in targets if t != "helpers" and not m.startswith(t + ".")}
            for m, targets in imports().items()}


def box(module: str) -> str:
    """The box a module is drawn in: a lesson folder, ``counting``, ``classroom``, or the module itself."""
    parts = module.split(".")
    if parts[1:2] == ["lessons"] and len(parts) > 2:
        return ".".join(parts[:3])
    if parts[1:2] in (["counting"], ["classroom"]):
        return ".".join(parts[:2])
    return module


def box_edges() -> dict[str, set[str]]:
    """Imports between boxes (a box's imports of itself and of the ``helpers`` package left out)."""
    edges: dict[str, set[str]] = {}
    for module, targets in package_edges().items():
        if module in ("helpers", "helpers.lessons", "helpers.harness"):
            continue
        edges.setdefault(box(module), set()).update(
            box(t) for t in targets if box(t) != box(module) and t not in ("helpers.lessons", "helpers.harness"))
    return edges


def mermaid() -> str:
    """A Mermaid flowchart: the kit, the harness and the lessons grouped, one arrow per import between boxes."""
    edges = box_edges()
    groups: dict[str, list[str]] = {"kit": [], "harness": [], "lessons": [], "engines": []}
    for name in sorted(edges):
        part = name.split(".")[1] if "." in name else ""
        key = "lessons" if part == "lessons" else "harness" if part == "harness" else (
            "engines" if part in ("counting", "classroom") else "kit")
        groups[key].append(name)
    titles = {"kit": "lesson kit (helpers/)", "harness": "helpers/harness/", "lessons": "helpers/lessons/",
              "engines": "engines (helpers/counting/, helpers/classroom/)"}
    lines = ["```mermaid", "flowchart LR"]
    for key, names in groups.items():
        lines.append(f'  subgraph {key}["{titles[key]}"]')
        lines += [f'    {n.replace(".", "_")}["{n.removeprefix("helpers.").removeprefix("lessons.")}"]' for n in names]
        lines.append("  end")
    for name in sorted(edges):
        lines += [f"  {name.replace('.', '_')} --> {t.replace('.', '_')}" for t in sorted(edges[name]) if t in edges]
    lines.append("```")
    return "\n".join(lines)


def lesson_facts(folder: Path) -> dict[str, tuple[str, ...]]:
    """A lesson folder's ``NOTEBOOKS``, ``GPU_STEPS`` and ``RESULTS``, read from its ``__init__.py`` (not run)."""
    facts: dict[str, tuple[str, ...]] = {}
    for node in ast.parse((folder / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("NOTEBOOKS", "GPU_STEPS", "RESULTS"):
                facts[node.targets[0].id] = tuple(ast.literal_eval(node.value))
    return facts


def lesson_folders() -> list[Path]:
    return sorted(p for p in LESSONS.iterdir() if (p / "__init__.py").exists())


def lesson_map() -> str:
    """notebook | folder | GPU step | result files, one row per lesson folder, by notebook."""
    rows = []
    for folder in lesson_folders():
        facts = lesson_facts(folder)
        rows.append((", ".join(f"`{n}`" for n in facts.get("NOTEBOOKS", ())), f"`helpers/lessons/{folder.name}/`",
                     ", ".join(f"`scripts/gpu/{s}.sh`" for s in facts.get("GPU_STEPS", ())) or "-",
                     ", ".join(f"`{r}.json`" for r in facts.get("RESULTS", ())) or "-"))
    lines = ["| notebook | folder | GPU step | results (`results/h200/`) |", "|---|---|---|---|"]
    return "\n".join(lines + [f"| {' | '.join(r)} |" for r in sorted(rows)])


def _replace(doc: str, start: str, end: str, body: str) -> str:
    head, found, rest = doc.partition(start)
    if not found or end not in rest:
        raise SystemExit(f"{DOC} has no {start} ... {end} block")
    return f"{head}{start}\n{body}\n{end}{rest.partition(end)[2]}"


def updated(doc: str) -> str:
    return _replace(_replace(doc, START, END, mermaid()), MAP_START, MAP_END, lesson_map())


def main(argv: list[str]) -> int:
    return regenerate(DOC, updated, argv,
                      "docs/architecture.md's import graph or lesson map is out of date: run python scripts/import_graph.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
