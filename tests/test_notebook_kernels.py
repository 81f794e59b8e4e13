"""The kernels shown in the notebooks are the ones the helpers run everywhere else."""

import inspect
import re
from pathlib import Path

import nbformat
import pytest

from helpers import pipeline
from helpers.lessons.attention import kernels as attention
from helpers.lessons.optimizer import kernels as optim
from helpers.lessons.softmax import kernels as softmax

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def kernels_in(notebook: str) -> dict[str, str]:
    """Every top-level ``def`` in the notebook's code cells (kernels and kernel factories), by name."""
    found = {}
    for cell in nbformat.read(NOTEBOOKS / notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for block in re.split(r"\n\s*\n\s*\n", cell.source):
            match = re.match(r"(?:@cuda\.jit\n)?def (\w+)\(", block.strip())
            if match:
                found[match.group(1)] = block.strip()
    return found


@pytest.mark.parametrize(
    "notebook, module, names",
    [
        ("01_three_kernels.ipynb", pipeline, ["add_kernel", "multiply_kernel", "scale_kernel"]),
        ("03_one_fused_kernel.ipynb", pipeline, ["fused_kernel"]),
        ("11_fusing_through_a_reduction.ipynb", softmax,
         ["row_max_kernel", "subtract_exp_kernel", "row_sum_kernel", "divide_kernel", "make_softmax_kernel",
          "make_pipelined_softmax_kernel", "online_softmax_kernel"]),
        ("11_fusing_through_a_reduction.ipynb", attention,
         ["scores_kernel", "weighted_sum_kernel", "make_tile_stager", "make_flash_attention_kernel"]),
        ("12_a_fused_optimizer_step.ipynb", optim,
         ["scale_inplace_kernel", "lerp_inplace_kernel", "add_square_inplace_kernel", "sqrt_kernel",
          "divide_inplace_kernel", "add_scalar_inplace_kernel", "addcdiv_inplace_kernel", "adamw_kernel"]),
    ],
)
def test_notebook_kernels_match_helpers(notebook, module, names):
    shown = kernels_in(notebook)
    source_file = Path(module.__file__).name
    for name in names:
        assert name in shown, f"{notebook} no longer defines {name}"
        obj = getattr(module, name)
        assert shown[name] == inspect.getsource(getattr(obj, "py_func", obj)).strip(), (
            f"{name} in {notebook} differs from helpers/{source_file}: change both together"
        )
