"""The kernels shown in notebooks 01 and 03 are the ones helpers.pipeline runs everywhere else."""

import inspect
import re
from pathlib import Path

import nbformat
import pytest

from helpers import pipeline

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def kernels_in(notebook: str) -> dict[str, str]:
    found = {}
    for cell in nbformat.read(NOTEBOOKS / notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for block in re.split(r"\n\s*\n\s*\n", cell.source):
            match = re.match(r"@cuda\.jit\ndef (\w+)\(", block.strip())
            if match:
                found[match.group(1)] = block.strip()
    return found


@pytest.mark.parametrize(
    "notebook, names",
    [
        ("01_three_kernels.ipynb", ["add_kernel", "multiply_kernel", "scale_kernel"]),
        ("03_one_fused_kernel.ipynb", ["fused_kernel"]),
    ],
)
def test_notebook_kernels_match_helpers(notebook, names):
    shown = kernels_in(notebook)
    for name in names:
        assert name in shown, f"{notebook} no longer defines {name}"
        assert shown[name] == inspect.getsource(getattr(pipeline, name).py_func).strip(), (
            f"{name} in {notebook} differs from helpers/pipeline.py: change both together"
        )
