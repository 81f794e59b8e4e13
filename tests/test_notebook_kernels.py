"""The kernels shown in the notebooks are the ones the helpers run everywhere else: each has one source, its cell.

``scripts/export_kernels.py`` copies every cell marked ``# exported to helpers/...`` into its
module; ``--check`` fails when a module's copy differs from its cell.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import export_kernels  # noqa: E402  (a check in scripts/, like import_graph.py)

SHOWING = ("01_", "03_", "07_", "10_", "11_", "12_", "14_")
"""The notebooks whose kernels are all exported from their cells."""

EXPORTED = [
    ("01_three_kernels.ipynb", "helpers/pipeline.py", ["add_kernel", "multiply_kernel", "scale_kernel"]),
    ("03_one_fused_kernel.ipynb", "helpers/pipeline.py", ["fused_kernel"]),
    ("07_the_last_fifteen_percent.ipynb", "helpers/lessons/roofline/kernels.py",
     ["grid_stride_kernel", "ilp4_kernel", "streaming_kernel", "_make_load4", "vec4_kernel", "linked_cuda_c_kernel"]),
    ("10_bytes_in_flight.ipynb", "helpers/lessons/inflight/kernels.py",
     ["copy_kernel", "scale_by_reciprocal_kernel", "chase_kernel", "add_chain", "mul_chain", "div_chain",
      "add_vec4_kernel", "multiply_vec4_kernel", "scale_vec4_kernel"]),
    ("11_fusing_through_a_reduction.ipynb", "helpers/lessons/softmax/kernels.py",
     ["row_max_kernel", "subtract_exp_kernel", "row_sum_kernel", "divide_kernel", "make_softmax_kernel",
      "make_pipelined_softmax_kernel", "online_softmax_kernel"]),
    ("12_attention_without_the_score_matrix.ipynb", "helpers/lessons/attention/kernels.py",
     ["scores_kernel", "weighted_sum_kernel", "make_tile_stager", "make_flash_attention_kernel"]),
    ("14_a_fused_optimizer_step.ipynb", "helpers/lessons/optimizer/kernels.py",
     ["scale_inplace_kernel", "lerp_inplace_kernel", "add_square_inplace_kernel", "sqrt_kernel",
      "divide_inplace_kernel", "add_scalar_inplace_kernel", "addcdiv_inplace_kernel", "adamw_kernel"]),
]

QUOTING = {"11_fusing_through_a_reduction.ipynb": ("helpers/lessons/softmax/vector.py",),
           "13_instruction_efficiency.ipynb": ("helpers/lessons/attention/tiled.py",
                                              "helpers/lessons/attention/tensor_cores.py")}
"""Notebooks that quote kernels in their prose without exporting cells: the modules the quotes come from."""

GPU_ONLY = {"_make_load4"}
"""Defined in its module's GPU branch only (in the simulator a Python stand-in replaces what it makes)."""


def definitions_anywhere(text: str, name: str) -> list[str]:
    """Every definition of ``name`` in a module's text, at any depth (a GPU or a simulator branch), dedented."""
    lines = text.split("\n")
    return [textwrap.dedent("\n".join(lines[min([d.lineno for d in n.decorator_list] + [n.lineno]) - 1:n.end_lineno]))
            for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == name]


def definition(body: str, name: str) -> str:
    """The text of a cell's top-level definition of ``name`` (with its decorators)."""
    return definitions_anywhere(body, name)[0]


def test_every_module_matches_its_cells():
    texts, changed = export_kernels.updates()
    assert not changed, "\n".join(changed)
    assert all(path.read_text() == text for path, text in texts.items())


@pytest.mark.parametrize("notebook, module, names", EXPORTED, ids=lambda x: x if isinstance(x, str) else None)
def test_the_notebook_is_the_source_of_its_kernels(notebook, module, names):
    cells = [c for c in export_kernels.marked_cells() if c.notebook == f"notebooks/{notebook}" and c.module == module]
    bodies = {name: cell.body for cell in cells for name in cell.names}
    missing = [name for name in names if name not in bodies]
    assert not missing, f"{notebook} has no cell marked `# exported to {module}` that defines {missing}"
    imported = importlib.import_module(module.removesuffix(".py").replace("/", "."))
    for name in names:
        obj = getattr(imported, name, None)
        if obj is None and name in GPU_ONLY:
            continue
        assert obj is not None, f"{module} does not define {name}"
        source = textwrap.dedent(inspect.getsource(getattr(obj, "py_func", obj))).strip()  # a GPU branch indents
        assert source == definition(bodies[name], name), (
            f"{module}'s {name} is not the one exported from {notebook}: a later definition replaces it")


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_the_lessons_show_no_kernel_that_is_not_exported(path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in cells]
    assert not [s for s in sources if "getsource" in s], f"{path.name} prints source with inspect: show it in a cell"
    if path.name.startswith(SHOWING):
        unmarked = [s.split("\n")[0] for s in sources if "cuda.jit" in s and not s.startswith("# exported to ")]
        assert not unmarked, f"{path.name} defines kernels in cells not exported: {unmarked}"


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
                                         if p.name.startswith(SHOWING) or p.name in QUOTING), ids=lambda p: p.stem)
def test_code_quoted_in_the_prose_is_the_modules(path):
    """A definition quoted in markdown (notebook 11's GPU ``block_max``, which no cell may define: it would
    replace the simulator's stand-in) is the text of a module the notebook exports to."""
    modules = {cell.module for cell in export_kernels.cells_of(path)} | set(QUOTING.get(path.name, ()))
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for quoted in re.findall(r"```python\n(.*?)```", "".join(cell["source"]), re.S):
            for node in ast.parse(quoted).body:
                if isinstance(node, ast.FunctionDef):
                    found = [d for m in modules for d in definitions_anywhere((ROOT / m).read_text(), node.name)]
                    assert definition(quoted, node.name) in found, (
                        f"{path.name} quotes {node.name} in its prose, differing from {sorted(modules)}")


def _copy_of_the_project(tmp_path: Path) -> Path:
    """The script, the lessons' notebooks and the helpers, in a folder of their own."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "export_kernels.py", tmp_path / "scripts")
    (tmp_path / "notebooks").mkdir()
    for notebook in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        shutil.copy(notebook, tmp_path / "notebooks")
    shutil.copytree(ROOT / "helpers", tmp_path / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "scripts" / "export_kernels.py"), *args],
                          capture_output=True, text=True, cwd=root)


def test_the_check_fails_on_a_doctored_cell_and_the_export_mends_it(tmp_path):
    root = _copy_of_the_project(tmp_path)
    assert _run(root, "--check").returncode == 0
    path = root / "notebooks" / "11_fusing_through_a_reduction.ipynb"
    notebook = json.loads(path.read_text())
    cell = next(c for c in notebook["cells"] if "def online_softmax_kernel" in "".join(c["source"]))
    cell["source"] = "".join(cell["source"]).replace("inverse = float32(1) / s", "inverse = float32(2) / s")
    path.write_text(json.dumps(notebook, indent=1))
    done = _run(root, "--check")
    assert done.returncode == 1
    assert "11_fusing_through_a_reduction.ipynb, the cell defining online_softmax_kernel" in done.stdout
    assert "helpers/lessons/softmax/kernels.py" in done.stdout
    assert _run(root).returncode == 0
    assert "inverse = float32(2) / s" in (root / "helpers/lessons/softmax/kernels.py").read_text()
    assert _run(root, "--check").returncode == 0


def test_a_region_edited_in_the_module_fails_and_is_overwritten(tmp_path):
    root = _copy_of_the_project(tmp_path)
    module = root / "helpers" / "pipeline.py"
    module.write_text(module.read_text().replace("out[i] = x[i] + y[i]", "out[i] = y[i] + x[i]"))
    done = _run(root, "--check")
    assert done.returncode == 1
    assert "the cell defining add_kernel" in done.stdout and "helpers/pipeline.py" in done.stdout
    assert _run(root).returncode == 0
    assert "out[i] = x[i] + y[i]" in module.read_text()


def test_a_marked_cell_must_hold_only_definitions():
    with pytest.raises(export_kernels.ExportError, match="only definitions.*`print"):
        export_kernels._defined_names("@cuda.jit\ndef k(x):\n    x[0] = 1\n\n\nprint(k)", "a cell")


def test_a_region_without_its_cell_is_refused():
    cell = export_kernels.Cell("notebooks/01_a.ipynb", 4, "helpers/m.py", "def f():\n    pass", ("f",))
    text = "\n".join(["import x", *export_kernels.rendered(cell), ""])
    assert export_kernels.exported(text, "helpers/m.py", [cell]) == (text, [])
    with pytest.raises(export_kernels.ExportError, match="no cell there defining f"):
        export_kernels.exported(text, "helpers/m.py", [])


def test_a_new_cell_gets_a_region_and_an_indented_region_keeps_its_indent():
    cell = export_kernels.Cell("notebooks/01_a.ipynb", 4, "helpers/m.py", "def f():\n    pass", ("f",))
    text, changed = export_kernels.exported("import x\n", "helpers/m.py", [cell])
    assert changed == ["notebooks/01_a.ipynb, the cell defining f (cell 4) has no export in helpers/m.py yet"]
    assert export_kernels.regions(text, "helpers/m.py")[0].body == cell.body
    indented = "if y:\n" + "\n".join(export_kernels.rendered(cell, "    ")) + "\n"
    assert "\n        pass\n" in indented
    assert export_kernels.exported(indented, "helpers/m.py", [cell]) == (indented, [])
