"""The given pipelines and the reference solutions, read from the exercise sources.

The solutions live only in the exercise notebooks (``notebooks/exercises/source``),
never in this package, so a student reading ``helpers`` finds no answer here.  A
measurement that needs them (the speedups of :mod:`helpers.classroom.speedups`, the
tests) runs the source's definitions: the code cells made only of imports and
``def`` statements, with the solution markers removed.
"""

from __future__ import annotations

import ast
import json
import linecache
import types
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCES = ROOT / "notebooks" / "exercises" / "source"
_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def source_path(number: int, folder: Path = SOURCES) -> Path:
    """The source notebook of exercise ``number`` (``NN__topic.ipynb``)."""
    found = sorted(folder.glob(f"{number:02d}__*.ipynb"))
    if not found:
        raise FileNotFoundError(
            f"no source notebook for exercise {number} in {folder}: the reference solutions are read from "
            "the repository's notebooks/exercises/source (install the project with `pip install -e .`)"
        )
    return found[0]


def definitions_only(source: str) -> bool:
    """Whether a cell holds only imports, definitions, constants (such as MAX_PARTIALS = 1024) and empty caches
    (such as ``scratch = {}``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    constant = lambda node: isinstance(node, ast.Assign) and (  # noqa: E731
        isinstance(node.value, ast.Constant) or (isinstance(node.value, ast.Dict) and not node.value.keys))
    return bool(tree.body) and all(isinstance(node, kinds) or constant(node) for node in tree.body)


def solution_code(path: Path) -> str:
    """The imports, definitions and constants of a source notebook, solutions filled in."""
    notebook = json.loads(path.read_text())
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        text = "\n".join(line for line in text.split("\n") if line.strip() not in _MARKERS)
        if definitions_only(text):
            cells.append(text)
    return "\n\n\n".join(cells) + "\n"


def reference_module(number: int, folder: Path = SOURCES) -> types.ModuleType:
    """A module holding exercise ``number``'s given pipeline and reference solution."""
    path = source_path(number, folder)
    module = types.ModuleType(f"exercise_{number}_reference")
    code = solution_code(path)
    filename = f"<reference solution of {path.name}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)  # so inspect finds it
    module.__file__ = filename
    exec(compile(code, filename, "exec"), module.__dict__)  # noqa: S102 - the project's own notebook
    return module


def reference_functions(number: int, unfused: str, fused: str, folder: Path = SOURCES) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(the given unfused pipeline, the reference fused solution) of exercise ``number``."""
    module = reference_module(number, folder)
    return getattr(module, unfused), getattr(module, fused)
