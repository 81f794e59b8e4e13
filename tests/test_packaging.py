"""The project as pip installs it outside this checkout: a wheel, as in a JupyterHub image or Colab.

``pip install -e .`` (what ``make`` does) reads ``helpers`` from the checkout, so it cannot
show a package or data file that a wheel leaves out.  Here the wheel is built from a copy of
the files git knows (as ``pip install git+...`` would see them), installed into a fresh
virtual environment in a temporary folder, and used from there, in the simulator: the grader
passes a committed exercise solution and fails a known-wrong one, the CUDA C source and the
committed results are read from the installed package.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from venv_support import ROOT, outside_env, venv_with_deps

from helpers import friendly
from helpers.classroom import reference

WRONG = ROOT / "notebooks" / "exercises" / "wrong" / "ex1_off_by_one.py"
IGNORED = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".ipynb_checkpoints")

# Run inside the installed environment: where everything came from, and what the grader says.
USE_THE_WHEEL = '''
import importlib.util, json, sys
from pathlib import Path

import helpers
from helpers import results
from helpers.checks import CheckFailed
from helpers.classroom import grading
from helpers.lessons.roofline import kernels
from helpers.lessons.sweep.record import Sweep


def load(path):
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


function = grading.EXERCISES[1].function
solution, wrong = load(sys.argv[1]), load(sys.argv[2])
out = {"backend": helpers.BACKEND, "helpers": helpers.__file__, "grading": grading.__file__,
       "cuda_c": str(kernels.CUDA_C_SOURCE), "cuda_c_found": kernels.CUDA_C_SOURCE.is_file(),
       "sweep": str(results.path_of(Sweep)), "sweep_sizes": len(results.load(Sweep).settings.sizes),
       "sys_path": sys.path}
grading.check(1, getattr(solution, function))
out["solution"] = "passed"
try:
    grading.check(1, getattr(wrong, function))
    out["wrong"] = "passed"
except CheckFailed as failure:
    out["wrong"] = str(failure)
    out["expected"] = wrong.EXPECTED
print("RESULT " + json.dumps(out))
'''


def _copy_source(into: Path) -> Path:
    """The files git knows (committed or new, not ignored), as a clone would have them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True)
    if listed.returncode != 0:  # not a git checkout: copy the tree, leaving out what git would ignore
        shutil.copytree(ROOT, into, ignore=IGNORED)
        return into
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


def _isolation() -> list[str]:
    """Build with this Python's own setuptools when it is new enough (a machine with no network), else isolated."""
    try:
        major = int(metadata.version("setuptools").split(".")[0])
    except metadata.PackageNotFoundError:
        return []
    return ["--no-build-isolation"] if major >= 77 else []


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(the wheel, pip's build log)."""
    folder = tmp_path_factory.mktemp("wheel")
    source = _copy_source(folder / "source")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", *_isolation(), "-w",
                           str(folder / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    if done.returncode and "Failed to establish a new connection" in done.stdout + done.stderr:
        pytest.skip("building the wheel needs setuptools>=77, which this Python lacks and no package index is reachable")
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    wheels = list((folder / "dist").glob("three_kernels_or_one-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], done.stdout + done.stderr


def test_the_wheel_holds_every_package_and_data_file(built: tuple[Path, str]) -> None:
    wheel, log = built
    names = set(zipfile.ZipFile(wheel).namelist())
    folders = {str(Path(n).parent) for n in names}
    for folder in sorted(p for p in (ROOT / "helpers").rglob("*") if p.is_dir() and p.name != "__pycache__"):
        relative = folder.relative_to(ROOT).as_posix()
        assert relative in folders, f"the wheel has no {relative}/: pyproject.toml or setup.py leaves it out"
    for path in [*(ROOT / "helpers").rglob("*.py"), *(ROOT / "helpers").rglob("*.cu")]:
        assert path.relative_to(ROOT).as_posix() in names, f"the wheel lacks {path.relative_to(ROOT)}"
    committed = sorted((ROOT / "results" / "h200").glob("*.json"))
    assert committed
    for path in committed:
        assert f"helpers/_results/h200/{path.name}" in names, f"the wheel lacks the committed result {path.name}"
    assert not any("__pycache__" in n for n in names)
    assert "is absent from the `packages` configuration" not in log, "setuptools warns that a package is left out"


def test_the_installed_wheel_grades_an_exercise_outside_the_checkout(built: tuple[Path, str], tmp_path: Path) -> None:
    wheel, _ = built
    python = venv_with_deps(tmp_path / "venv", wheel)
    work = tmp_path / "work"
    work.mkdir()
    (work / "solution.py").write_text(reference.solution_code(reference.source_path(1)))
    shutil.copy(WRONG, work / "wrong.py")
    (work / "use_the_wheel.py").write_text(USE_THE_WHEEL)
    done = subprocess.run([str(python), "use_the_wheel.py", "solution.py", "wrong.py"], cwd=work,
                          env=outside_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    out = json.loads(done.stdout.split("RESULT ", 1)[1])
    venv = (tmp_path / "venv").resolve()
    for key in ("helpers", "grading", "cuda_c", "sweep"):
        assert Path(out[key]).resolve().is_relative_to(venv), f"{key} came from {out[key]}, not the installed wheel"
    assert not any(Path(p).resolve() == ROOT for p in out["sys_path"] if p), "the checkout is on sys.path"
    assert out["cuda_c_found"] and out["sweep_sizes"] > 0
    assert out["solution"] == "passed"
    assert out["wrong"] != "passed" and re.search(out["expected"], out["wrong"], re.S), out["wrong"]


def test_the_repository_address_is_written_once() -> None:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Repository"] == friendly.REPOSITORY
    readme = (ROOT / "README.md").read_text()
    assert friendly.binder_url() in readme, "the README's Binder badge is not built from helpers.friendly.REPOSITORY"
    assert friendly.colab_url("notebooks/01_three_kernels.ipynb") in readme
    found = set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", readme))
    assert found <= {friendly.REPOSITORY}, f"the README names another repository: {sorted(found)}"


def test_binder_builds_the_simulator_path(tmp_path: Path) -> None:
    """binder/postBuild, run with a stand-in `python` that records its arguments (repo2docker is not here)."""
    from test_environment import TESTED_PYTHONS

    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", runtime) and runtime.removeprefix("python-") in TESTED_PYTHONS
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$(pwd) $*" >> {tmp_path / "calls"}\n')
    fake.chmod(0o755)
    env = outside_env(PATH=f"{fake.parent}:/usr/bin:/bin")
    done = subprocess.run([str(ROOT / "binder" / "postBuild")], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [f"{ROOT} -m pip install --no-cache-dir -e .[cu13]",
                     f"{ROOT} -m ipykernel install --sys-prefix --name {friendly.KERNEL_NAME} "
                     f"--display-name {friendly.KERNEL_DISPLAY_NAME}"], calls
