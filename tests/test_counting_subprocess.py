"""The dynamic engine's GPU path: a launch counted in a simulator subprocess, globals and all.

On a GPU the dynamic engine sends the kernel to a subprocess running Numba's simulator
(helpers.counting.traffic._simulate_in_subprocess).  The kernel travels with the globals
it uses (helpers.counting.carry): modules, constants, device functions, and objects an
importable module holds, re-imported there under the simulator.  These tests call that
path directly, in the simulator too, and compare with the count taken in this process.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32

import helpers
from helpers.checks import poisoned, random_inputs
from helpers.counting import CannotAttribute, simulated_traffic
from helpers.counting.carry import function_spec
from helpers.counting.traffic import _simulate_in_subprocess
from helpers.lessons.inflight.kernels import copy_kernel
from helpers.lessons.roofline import kernels
from helpers.sizes import BLOCK_SIZE, blocks_for

N = 203  # not a multiple of 4 nor of the block
SHIFT = 0.5


def _py(kernel):
    return getattr(kernel, "py_func", None) or kernel.fn


def _both_ways(kernel, grid, args, names):
    """The count in this process (the simulator; skipped on a GPU) and in the subprocess."""
    there = _simulate_in_subprocess(kernel, grid, BLOCK_SIZE, args, names)
    if helpers.is_simulator():
        here = simulated_traffic(kernel, grid, BLOCK_SIZE, args, names)
        assert there.per_array() == here.per_array()
    return there


@pytest.mark.parametrize("name", ["vec4", "streaming", "vec4_streaming", "grid_stride"])
def test_roofline_kernels_and_their_intrinsics_count_in_the_subprocess(name):
    """load4 / load_cs ... are carried as roofline's own names: under the simulator, their stand-ins."""
    kernel = kernels.VARIANT_INFO[name].kernel
    a, b, c = (cuda.to_device(h) for h in random_inputs(N, seed=4))
    args, names = (a, b, c, np.float32(1.7), poisoned(N)), ["a", "b", "c", "s", "out"]
    grid = blocks_for(max(N // 4, 3)) if "vec4" in name else blocks_for(N)
    counted = _both_ways(kernel, grid, args, names)
    assert counted.per_array() == {"a": (4 * N, 0), "b": (4 * N, 0), "c": (4 * N, 0), "out": (0, 4 * N)}


SPEC_UNDER_THE_COMPILER = """
import json
import helpers  # picks the real compiler (NUMBA_ENABLE_CUDASIM=0) before numba loads
from helpers.counting.carry import function_spec
from helpers.lessons.roofline.kernels import vec4_kernel
print(json.dumps(function_spec(vec4_kernel.py_func)))
"""


def test_a_gpu_process_sends_roofline_intrinsics_by_name():
    """What the GPU side sends (made under the real compiler, no GPU needed): names to import again."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", SPEC_UNDER_THE_COMPILER], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    spec = json.loads(done.stdout.strip().splitlines()[-1])
    assert spec["globals"]["load4"] == {"import": "helpers.lessons.roofline.kernels:load4"}
    assert spec["globals"]["store4"] == {"import": "helpers.lessons.roofline.kernels:store4"}
    assert spec["globals"]["cuda"] == {"module": "numba.cuda"}


@cuda.jit(device=True)
def _shifted(v):
    return v + float32(SHIFT)


@cuda.jit(device=True)
def _soft(v):
    return float32(math.sqrt(_shifted(v) * _shifted(v) + float32(1)))


@cuda.jit
def _soft_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _soft(x[i]) + x[(i + 1) % x.size]


def _soft_reference(x):
    v = x.astype(np.float64) + SHIFT
    return np.sqrt(v * v + 1) + np.roll(x, -1)


def test_device_functions_math_float32_and_constants_of_a_module_are_carried():
    host = random_inputs(N, count=1, seed=1)[0]
    x, out = cuda.to_device(host), poisoned(N)
    counted = _both_ways(_soft_kernel, blocks_for(N), (x, out), ["x", "out"])
    assert counted.per_array() == {"x": (8 * N, 0), "out": (0, 4 * N)}
    assert function_spec(_py(_soft_kernel))["globals"]["_soft"]["import"].endswith(":_soft")


NOTEBOOK = '''
import math
import numpy as np
from numba import cuda, float32

SHIFT = 0.5
SCALE = np.float32(2)

@cuda.jit(device=True)
def shifted(v):
    return v + float32(SHIFT)

@cuda.jit(device=True)
def soft(v):
    return float32(math.sqrt(shifted(v) * shifted(v) + float32(1))) * SCALE

@cuda.jit
def soft_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = soft(x[i]) + x[(i + 1) % x.size]

def make_window_kernel(width):
    @cuda.jit
    def window_kernel(x, out):
        i = cuda.grid(1)
        if i + width <= x.size:
            total = float32(0)
            for k in range(width):
                total += x[i + k]
            out[i] = total
    return window_kernel

settings = {"scale": 2.0}

@cuda.jit
def uses_a_dict(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * settings["scale"]
'''


@pytest.fixture
def notebook(tmp_path):
    """The definitions above, made as a notebook makes them: in ``__main__``, with readable source."""
    path = tmp_path / "cell.py"
    path.write_text(NOTEBOOK)
    namespace = {"__name__": "__main__"}
    exec(compile(NOTEBOOK, str(path), "exec"), namespace)  # noqa: S102 - the test's own source
    return namespace


def test_a_notebooks_device_functions_and_constants_travel_as_source(notebook):
    spec = function_spec(_py(notebook["soft_kernel"]))
    soft = spec["globals"]["soft"]["device"]
    assert "device" in soft["globals"]["shifted"] and soft["globals"]["SCALE"] == {"value": 2.0, "dtype": "float32"}
    host = random_inputs(N, count=1, seed=2)[0]
    x, out = cuda.to_device(host), poisoned(N)
    counted = _both_ways(notebook["soft_kernel"], blocks_for(N), (x, out), ["x", "out"])
    assert counted.per_array() == {"x": (8 * N, 0), "out": (0, 4 * N)}


def test_a_kernel_made_by_a_factory_carries_what_its_closure_captured(notebook):
    width = 3
    kernel = notebook["make_window_kernel"](width)
    x, out = cuda.to_device(random_inputs(N, count=1, seed=3)[0]), poisoned(N)
    counted = _both_ways(kernel, blocks_for(N), (x, out), ["x", "out"])
    threads = N - width + 1
    assert counted.per_array() == {"x": (4 * width * threads, 0), "out": (0, 4 * threads)}


def test_a_global_that_cannot_travel_is_refused_by_name_before_the_subprocess(notebook):
    x, out = cuda.to_device(np.ones(N, np.float32)), poisoned(N)
    with pytest.raises(CannotAttribute, match=r"uses_a_dict uses the global `settings` \(a dict from a notebook"):
        _simulate_in_subprocess(notebook["uses_a_dict"], blocks_for(N), BLOCK_SIZE, (x, out), ["x", "out"])


def test_an_index_past_the_end_in_the_subprocess_names_the_array():
    x, out = cuda.to_device(np.ones(100, np.float32)), poisoned(300)
    with pytest.raises(IndexError, match=r"is out of bounds for axis 0 with size 100: a thread indexed past the end "
                                         r"of `x` \(100 elements\); add a bounds guard"):
        _simulate_in_subprocess(copy_kernel, 2, BLOCK_SIZE, (x, out), ["x", "out"])
