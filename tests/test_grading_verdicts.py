"""One verdict per solution, wherever a student runs it.

The review's correct-but-unusual solutions (an if/else ReLU, a branch around the AdamW
update, a defensive ``raise NotImplementedError(...)``, a grid-stride loop on a fixed grid,
an early return, a device function) and its accepted wrong ones (a grid written into the
code, W1-W3; copies between device arrays, W4-W5; a result assigned from the host, W6;
and a kernel that stays within the trips but moves too many bytes) are graded with both
counting engines -- the static one a GPU uses, the dynamic one of the simulator -- at the
simulator's sizes and at a GPU-like set of sizes that the simulator can afford (past any
plausible grid written into the code).  Each must get one verdict, the same words from
either engine, and the same words (numbers aside) at either size set.

The GPU's own sizes (65,537 and 1,048,579) are tried on a GPU by
``tests/test_exercises.py`` (the unusual and the wrong solutions at the backend's sizes).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

import helpers  # noqa: F401
from helpers.checks import CheckFailed
from helpers.classroom import grading
from helpers.ledger import counting_engine

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "notebooks" / "exercises"
sys.path.insert(0, str(EXERCISES / "wrong"))

GPU_LIKE_SIZES = (1, 257, 8195)
"""Sizes like a GPU's, as far as the simulator affords: past a grid of 32 x 256 threads written into the code."""

CASES = {  # path -> the verdict every engine and size set must give
    "unusual/ex1_if_else_relu.py": "pass",
    "unusual/ex1_clamp_relu_1024.py": "pass",
    "unusual/ex1_grid_stride_fixed_grid.py": "pass",
    "unusual/ex1_early_return.py": "pass",
    "unusual/ex1_device_function.py": "pass",
    "unusual/ex1_defensive_check.py": "pass",
    "unusual/ex5_branch_on_the_moment.py": "pass",
    "unusual/ex5_torch_formulation.py": "pass",
    "wrong/ex1_fixed_grid.py": "fail",  # W1
    "wrong/ex1_fixed_index.py": "fail",  # W2
    "wrong/ex5_fixed_grid.py": "fail",  # W3
    "wrong/ex1_device_copy.py": "fail",  # W4
    "wrong/ex5_device_copies.py": "fail",  # W5
    "wrong/ex1_host_slice.py": "fail",  # W6
    "wrong/ex1_intermediate_in_one_kernel.py": "fail",  # within the trips, 4 bytes per element too many
    "wrong/ex4_one_block_first_pass.py": "fail",  # right values and trips, its first pass in one block
}


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"verdicts_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdict(exercise, fn, engine: str, sizes) -> tuple[str, str]:
    with counting_engine(engine):
        try:
            return "pass", grading.grade(exercise, fn, sizes=sizes, seed=0).summary()
        except CheckFailed as failure:
            return "fail", str(failure)


def _numbers_aside(message: str) -> str:
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", message)


@pytest.mark.parametrize("relative", list(CASES), ids=[Path(p).stem for p in CASES])
def test_one_verdict_on_both_engines_at_both_size_sets(relative):
    path = EXERCISES / relative
    module = _load(path)
    exercise = grading.EXERCISES[int(re.match(r"ex(\d+)_", path.name).group(1))]
    fn = getattr(module, exercise.function)
    verdicts = {(engine, label): _verdict(exercise, fn, engine, sizes)
                for label, sizes in (("simulator", grading.SIMULATOR_SIZES), ("gpu-like", GPU_LIKE_SIZES))
                for engine in ("dynamic", "static")}
    for label in ("simulator", "gpu-like"):
        assert verdicts["dynamic", label] == verdicts["static", label], label  # the same words from either engine
    simulator, gpu_like = verdicts["dynamic", "simulator"], verdicts["dynamic", "gpu-like"]
    assert simulator[0] == gpu_like[0] == CASES[relative], verdicts
    assert _numbers_aside(simulator[1]) == _numbers_aside(gpu_like[1])
    if CASES[relative] == "fail":
        assert re.search(module.EXPECTED, gpu_like[1], re.S), gpu_like[1]
