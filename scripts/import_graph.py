"""The import graph of ``helpers``, read from the code, and the drawing in docs/architecture.md.

    python scripts/import_graph.py           # rewrite the drawing in docs/architecture.md
    python scripts/import_graph.py --check   # exit 1 if the drawing is out of date

Imports inside functions count too.  ``tests/test_structure.py`` uses the same
functions to forbid cycles and hidden imports, and keeps the drawing up to date.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "helpers"
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- import-graph:start -->", "<!-- import-graph:end -->"
LAYERS = {"helpers.counting": "counting", "helpers.lab": "lab", "helpers.classroom": "classroom"}


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


def mermaid() -> str:
    """A Mermaid flowchart: one box per module, grouped by subpackage, one arrow per import."""
    edges = package_edges()
    groups: dict[str, list[str]] = {"lesson kit (helpers/)": []}
    for module in sorted(edges):
        if module == "helpers":
            continue
        layer = next((name for prefix, name in LAYERS.items() if module == prefix or module.startswith(prefix + ".")), None)
        groups.setdefault(f"helpers/{layer}/" if layer else "lesson kit (helpers/)", []).append(module)

    def node(module: str) -> str:
        return module.replace(".", "_")

    lines = ["```mermaid", "flowchart LR"]
    for title, modules in groups.items():
        lines.append(f'  subgraph {title.split("/")[1] or "kit"}["{title}"]' if title.startswith("helpers/")
                     else f'  subgraph kit["{title}"]')
        lines += [f'    {node(m)}["{m.removeprefix("helpers.")}"]' for m in modules]
        lines.append("  end")
    for module in sorted(edges):
        for target in sorted(edges[module]):
            if module != "helpers" and target in edges and not target.endswith(("counting", "lab", "classroom")):
                lines.append(f"  {node(module)} --> {node(target)}")
    lines.append("```")
    return "\n".join(lines)


def updated(doc: str) -> str:
    head, found, rest = doc.partition(START)
    if not found or END not in rest:
        raise SystemExit(f"{DOC} has no {START} ... {END} block")
    return f"{head}{START}\n{mermaid()}\n{END}{rest.partition(END)[2]}"


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    new = updated(text)
    if "--check" in argv:
        if new != text:
            print("docs/architecture.md's import graph is out of date: run python scripts/import_graph.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
