"""Each kernel a lesson shows has one source, the notebook cell that shows it; this script copies it into ``helpers``.

    python scripts/export_kernels.py           # write every marked cell into its module
    python scripts/export_kernels.py --check   # exit 1, naming the cell and the module, if any differ

A code cell whose first line is ``# exported to helpers/<path>.py`` is the source of the
definitions in it (nothing else may stand in such a cell: ``def`` and ``class`` statements,
with their decorators and comments).  The module holds a copy of the cell, below that first
line, between two generated marker comments::

    # >>> exported from notebooks/01_three_kernels.ipynb (the cell defining add_kernel);
    # >>> edit the notebook, then run python scripts/export_kernels.py
    @cuda.jit
    def add_kernel(x, y, out):
        ...
    # <<< end of the export from notebooks/01_three_kernels.ipynb

A region is the cell's by the notebook and the cell's first definition, wherever it
stands in the module; indented markers (inside an ``if`` block) indent the copy.  The
module keeps its own docstring, imports and other code outside the regions.  A marked
cell with no region yet gets one at the end of its module (move the markers where the
definitions belong); a region whose cell is gone is an error, never deleted.

``tests/test_notebook_kernels.py`` runs the check and keeps a list of the kernels each
notebook is the source of.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "python scripts/export_kernels.py"
CELL_MARK = re.compile(r"# exported to (\S+\.py)\s*")
BEGIN = re.compile(r"(?P<indent>[ \t]*)# >>> exported from (?P<notebook>\S+\.ipynb) "
                   r"\(the cell defining (?P<name>\w+)\);")
AGAIN = f"# >>> edit the notebook, then run {COMMAND}"
END = "# <<< end of the export from {notebook}"


class ExportError(Exception):
    """A marked cell or a module's region that the script cannot export or check (the message says which)."""


@dataclass(frozen=True)
class Cell:
    """One marked code cell: where it is, the module it is the source of, its definitions."""

    notebook: str  # relative to the repository: notebooks/NN_topic.ipynb
    index: int  # the cell's position in the notebook, from 0
    module: str  # relative to the repository: helpers/....py
    body: str  # the cell's source below the marker line, without leading or trailing blank lines
    names: tuple[str, ...]  # the names it defines, in order

    @property
    def where(self) -> str:
        return f"{self.notebook}, the cell defining {self.names[0]} (cell {self.index})"


@dataclass(frozen=True)
class Region:
    """One exported copy in a module: lines ``begin`` to ``end`` (the two markers), inclusive."""

    notebook: str
    name: str
    indent: str
    begin: int
    end: int
    body: str


def _strip_blank_lines(lines: list[str]) -> str:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return "\n".join(line.rstrip() for line in lines)


def _defined_names(body: str, where: str) -> tuple[str, ...]:
    try:
        tree = ast.parse(body)
    except SyntaxError as exc:
        raise ExportError(f"{where} is marked for export but is not valid Python: {exc}") from exc
    others = [node for node in tree.body if not isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    if not tree.body or others:
        found = f"`{ast.get_source_segment(body, others[0]).splitlines()[0]}`" if others else "nothing"
        raise ExportError(f"{where} is marked for export, so it may hold only definitions (def, class), "
                          f"but it holds {found}: move other code to a cell of its own")
    return tuple(node.name for node in tree.body)


def cells_of(notebook: Path, root: Path = ROOT) -> list[Cell]:
    """The marked code cells of one notebook."""
    relative = notebook.relative_to(root).as_posix()
    found = []
    for index, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        first, _, rest = source.partition("\n")
        mark = CELL_MARK.fullmatch(first)
        if cell["cell_type"] != "code" or not mark:
            continue
        body = _strip_blank_lines(rest.split("\n"))
        names = _defined_names(body, f"{relative} cell {index}")
        found.append(Cell(relative, index, mark.group(1), body, names))
    return found


def marked_cells(root: Path = ROOT) -> list[Cell]:
    """Every marked cell of the lessons' notebooks (``notebooks/NN_*.ipynb``), in notebook order."""
    return [cell for notebook in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
            for cell in cells_of(notebook, root)]


def regions(text: str, module: str) -> list[Region]:
    """The exported regions of a module's text."""
    lines = text.split("\n")
    found = []
    for i, line in enumerate(lines):
        begin = BEGIN.fullmatch(line)
        if not begin:
            continue
        indent, notebook = begin["indent"], begin["notebook"]
        if i + 1 == len(lines) or lines[i + 1] != indent + AGAIN:
            raise ExportError(f"{module} line {i + 1}: an export marker not followed by `{indent + AGAIN}`")
        end = indent + END.format(notebook=notebook)
        try:
            stop = lines.index(end, i + 2)
        except ValueError:
            raise ExportError(f"{module} line {i + 1}: the export from {notebook} has no end marker `{end}`") from None
        if any(BEGIN.fullmatch(inner) for inner in lines[i + 2:stop]):
            raise ExportError(f"{module} line {i + 1}: an export region inside another one")
        body = [inner[len(indent):] if inner.startswith(indent) else inner for inner in lines[i + 2:stop]]
        found.append(Region(notebook, begin["name"], indent, i, stop, _strip_blank_lines(body)))
    return found


def rendered(cell: Cell, indent: str = "") -> list[str]:
    """The lines of a cell's region in its module, markers included."""
    body = [indent + line if line.strip() else "" for line in cell.body.split("\n")]
    head = f"{indent}# >>> exported from {cell.notebook} (the cell defining {cell.names[0]});"
    return [head, indent + AGAIN, *body, indent + END.format(notebook=cell.notebook)]


def exported(text: str, module: str, cells: list[Cell]) -> tuple[str, list[str]]:
    """The module's text with every cell's region written, and a line for each region that differed."""
    by_key: dict[tuple[str, str], Cell] = {}
    for cell in cells:
        if (cell.notebook, cell.names[0]) in by_key:
            raise ExportError(f"{by_key[cell.notebook, cell.names[0]].where} and cell {cell.index} both export "
                              f"{cell.names[0]} to {module}: one cell per definition")
        by_key[cell.notebook, cell.names[0]] = cell
    lines = text.split("\n")
    changed, placed = [], set()
    for region in reversed(regions(text, module)):
        cell = by_key.get((region.notebook, region.name))
        if cell is None:
            raise ExportError(f"{module} line {region.begin + 1} holds an export from {region.notebook} (the cell "
                              f"defining {region.name}), but no cell there defining {region.name} first is marked "
                              f"`# exported to {module}`: mark the cell, or delete the region")
        placed.add((region.notebook, region.name))
        if region.body != cell.body:
            changed.append(f"{cell.where} differs from its export in {module}")
        lines[region.begin:region.end + 1] = rendered(cell, region.indent)
    for key, cell in by_key.items():
        if key not in placed:
            changed.append(f"{cell.where} has no export in {module} yet")
            while lines and not lines[-1].strip():
                lines.pop()
            lines += ["", "", *rendered(cell), ""]
    return "\n".join(lines), sorted(changed)


def updates(root: Path = ROOT) -> tuple[dict[Path, str], list[str]]:
    """Each module's text with its cells exported (every module a marked cell names), and what differed."""
    cells = marked_cells(root)
    texts, changed = {}, []
    for module in sorted({cell.module for cell in cells}):
        path = root / module
        if not module.startswith("helpers/") or not path.is_file():
            names = "; ".join(c.where for c in cells if c.module == module)
            raise ExportError(f"{names}: marked `# exported to {module}`, which is no module under helpers/")
        texts[path], differed = exported(path.read_text(), module, [c for c in cells if c.module == module])
        changed += differed
    return texts, changed


def main(argv: list[str]) -> int:
    try:
        texts, changed = updates()
    except ExportError as exc:
        print(exc)
        return 1
    if "--check" in argv:
        for line in changed:
            print(f"{line}: edit the notebook (not the module), then run {COMMAND}")
        return 1 if changed else 0
    for path, text in texts.items():
        if path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
