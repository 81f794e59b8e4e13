"""The same code gets the same verdict and message from either counting engine.

On a GPU the grader's ledger counts from the compiled PTX (the static engine); in the
simulator it records the executed accesses (the dynamic engine).  Both are forced here,
on either backend, for every solution and every known-wrong solution (the folder is
globbed, so new ones are included), for the correct solutions written an unusual way
(`notebooks/exercises/unusual/`: an if/else ReLU, a branch around the AdamW update, a
grid-stride loop on a fixed grid, ...), and for two correct solutions written differently
from the committed ones: exercise 1 guarded by a scalar `n`, exercise 4 reduced block by
block.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32

import helpers  # noqa: F401
from helpers.checks import CheckFailed
from helpers.classroom import grading
from helpers.classroom.reference import definitions_only
from helpers.ledger import counting_engine
from helpers.sizes import BLOCK_SIZE, blocks_for

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "notebooks" / "exercises"
WRONG = sorted((EXERCISES / "wrong").glob("ex*.py"))
UNUSUAL = sorted((EXERCISES / "unusual").glob("ex*.py"))
SOURCES = sorted((EXERCISES / "source").glob("[0-9]*.ipynb"))

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(EXERCISES / "wrong"))
import release_exercises  # noqa: E402


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdict(exercise, fn, engine: str) -> tuple[bool, str]:
    with counting_engine(engine):
        try:
            # The simulator's sizes on either backend: on a GPU the dynamic engine runs the
            # simulator in a subprocess, which follows at most about 20,000 threads.
            result = grading.grade(exercise, fn, sizes=grading.SIMULATOR_SIZES, seed=0)
        except CheckFailed as failure:
            return False, str(failure)
    return True, result.summary()


def _both(exercise, fn) -> tuple[tuple[bool, str], tuple[bool, str]]:
    return _verdict(exercise, fn, "dynamic"), _verdict(exercise, fn, "static")


def _both_for_file(path: Path) -> tuple[tuple[bool, str], tuple[bool, str]]:
    """Both engines' verdicts on the graded solution in ``path`` (``exN_*.py``: exercise N)."""
    module = _load(path, f"two_paths_{path.stem}")
    exercise = grading.EXERCISES[int(re.match(r"ex(\d+)_", path.name).group(1))]
    return _both(exercise, getattr(module, exercise.function))


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_a_wrong_solution_gets_the_same_verdict_from_both_engines(path):
    dynamic, static = _both_for_file(path)
    assert dynamic == static
    assert not dynamic[0], f"{path.name} passed: {dynamic[1]}"


@pytest.mark.parametrize("path", UNUSUAL, ids=[p.stem for p in UNUSUAL])
def test_an_unusual_correct_solution_passes_on_both_engines_with_the_same_message(path):
    dynamic, static = _both_for_file(path)
    assert dynamic == static
    assert dynamic[0], f"{path.name} failed: {dynamic[1]}"


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_a_solution_passes_on_both_engines_with_the_same_message(source, tmp_path):
    notebook = release_exercises.make_release(source, "solution")
    cells = [c.source for c in notebook.cells if c.cell_type == "code" and definitions_only(c.source)]
    path = tmp_path / f"two_paths_solution_{source.stem}.py"
    path.write_text("\n\n\n".join(cells) + "\n")
    module = _load(path, path.stem)
    exercise = grading.EXERCISES[int(source.name[:2])]
    dynamic, static = _both(exercise, getattr(module, exercise.function))
    assert dynamic == static
    assert dynamic[0], dynamic[1]


# --- correct solutions written another way ---------------------------------------------------


@cuda.jit
def saxpy_relu_kernel_n(a, x, y, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = max(a * x[i] + y[i], 0.0)


def saxpy_relu_scalar_guard(a, x, y, out):
    saxpy_relu_kernel_n[blocks_for(out.size), BLOCK_SIZE](a, x, y, out, out.size)


@cuda.jit
def block_max_abs(x, maxima):
    best = cuda.shared.array(BLOCK_SIZE, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    best[t] = abs(x[i]) if i < x.size else float32(0.0)
    cuda.syncthreads()
    step = BLOCK_SIZE // 2
    while step > 0:
        if t < step:
            best[t] = max(best[t], best[t + step])
        cuda.syncthreads()
        step //= 2
    if t == 0:
        maxima[cuda.blockIdx.x] = best[0]


@cuda.jit
def max_of_maxima(maxima, m):
    if cuda.grid(1) == 0:
        best = float32(0.0)
        for k in range(maxima.size):
            best = max(best, maxima[k])
        m[0] = best


@cuda.jit
def divide_by(x, m, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] / m[0]


def normalize_by_max_per_block(x, out):
    blocks = blocks_for(x.size)
    maxima = cuda.device_array(blocks, dtype=np.float32)
    m = cuda.device_array(1, dtype=np.float32)
    block_max_abs[blocks, BLOCK_SIZE](x, maxima)
    max_of_maxima[1, 32](maxima, m)
    divide_by[blocks, BLOCK_SIZE](x, m, out)


@pytest.mark.parametrize("number, fn", [(1, saxpy_relu_scalar_guard), (4, normalize_by_max_per_block)],
                         ids=["exercise 1 guarded by a scalar n", "exercise 4 reduced block by block"])
def test_correct_solutions_written_differently_pass_on_both_engines(number, fn):
    dynamic, static = _both(grading.EXERCISES[number], fn)
    assert dynamic[0], dynamic[1]
    assert dynamic == static
