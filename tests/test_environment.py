"""environment.yml (conda-forge) and pyproject.toml (pip) must describe the same environment."""

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
# conda packages with no pip twin: the interpreter, pip itself, the CUDA version selector and NVVM,
# which pip gets through numba-cuda's cu12/cu13 extras instead.
CONDA_ONLY = {"python", "pip", "cuda-version", "cuda-nvcc-impl"}
# conda-forge's slimmer builds of a pip package: same code and version, fewer extras.
CONDA_NAMES = {"matplotlib-base": "matplotlib", "nbconvert-core": "nbconvert"}
# conda-forge packages that carry libNVVM (nvvm/lib64). cuda-nvcc-tools does not: nvcc and ptxas only.
NVVM_CARRIERS = {"cuda-nvvm-impl", "cuda-nvvm", "cuda-nvcc-impl", "cuda-nvcc"}
# The Python versions the tests run on, and where: declare these and no others.
TESTED_PYTHONS = {"3.11": "CI and the development machines", "3.12": "the H200 image",
                  "3.13": "CI's second, shorter run (.ci/run)"}


def pip_requirements() -> dict[str, SpecifierSet]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra, deps in project["optional-dependencies"].items():
        if extra != "cu12":  # the CUDA 12 alternative to the default cu13
            lines += deps
    merged: dict[str, SpecifierSet] = {}
    for line in lines:
        req = Requirement(line)
        merged.setdefault(req.name.lower(), SpecifierSet())
        merged[req.name.lower()] &= req.specifier
    return merged


def conda_spec(text: str) -> tuple[str, SpecifierSet]:
    name, _, spec = re.match(r"([A-Za-z0-9_.-]+)\s*(=*)(.*)", text.split("#")[0].strip()).groups()
    spec = spec.strip()
    if spec and not spec[0] in "<>=!":
        spec = f"=={spec}.*" if spec.count(".") < 2 else f"=={spec}"
    elif spec.startswith("=") and not spec.startswith("=="):
        spec = f"=={spec[1:]}.*"
    return name.lower(), SpecifierSet(spec)


def conda_requirements() -> dict[str, SpecifierSet]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    found: dict[str, SpecifierSet] = {}
    for item in env["dependencies"]:
        if isinstance(item, dict):  # a pip: section for packages conda-forge lacks
            for line in item.get("pip", []):
                req = Requirement(line)
                found[req.name.lower()] = req.specifier
            continue
        name, spec = conda_spec(str(item))
        found[CONDA_NAMES.get(name, name)] = spec
    return found


def conda_names() -> set[str]:
    """The conda package names as written in environment.yml (pip section left out)."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    return {conda_spec(str(item))[0] for item in env["dependencies"] if not isinstance(item, dict)}


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def allowed_minors(spec: SpecifierSet) -> set[str]:
    """The 3.x minor versions (3.6 ... 3.20) that a Python version specifier admits."""
    return {f"3.{m}" for m in range(6, 21) if Version(f"3.{m}.0") in spec}


def test_same_packages():
    pip, conda = pip_requirements(), conda_requirements()
    assert set(pip) == set(conda) - CONDA_ONLY


def test_compatible_pins():
    pip, conda = pip_requirements(), conda_requirements()
    for name, spec in pip.items():
        assert str(spec), f"{name} is not pinned in pyproject.toml"
        assert set(map(str, spec)) == set(map(str, conda[name])), f"{name}: pip {spec} vs conda {conda[name]}"


def test_conda_spec_parsing():
    assert conda_spec("numba=0.68") == ("numba", SpecifierSet("==0.68.*"))
    assert conda_spec("numpy>=2.0,<2.5") == ("numpy", SpecifierSet(">=2.0,<2.5"))
    assert conda_spec("cuda-version=13   # note") == ("cuda-version", SpecifierSet("==13.*"))
    assert conda_spec("python>=3.11,<3.13  # note") == ("python", SpecifierSet(">=3.11,<3.13"))
    assert conda_spec("cuda-nvcc-impl") == ("cuda-nvcc-impl", SpecifierSet(""))


def test_numpy_below_2_5_for_numba_cuda():
    # numba-cuda 0.30.4 calls np.row_stack, which numpy 2.5 removed.
    assert "2.5" not in pip_requirements()["numpy"]
    assert "2.4.9" in pip_requirements()["numpy"]


def test_python_versions_declared_are_the_ones_tested():
    declared = SpecifierSet(pyproject()["project"]["requires-python"])
    assert allowed_minors(declared) == set(TESTED_PYTHONS), f"requires-python {declared} vs tested {sorted(TESTED_PYTHONS)}"


def test_this_interpreter_is_one_of_the_tested_versions():
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert running in TESTED_PYTHONS, f"tests run on Python {running}, which is not declared as tested"
    assert Version(sys.version.split()[0]) in SpecifierSet(pyproject()["project"]["requires-python"])


def test_conda_python_matches_requires_python():
    assert conda_requirements()["python"] == SpecifierSet(pyproject()["project"]["requires-python"])


def test_classifiers_name_exactly_the_tested_versions():
    classifiers = pyproject()["project"].get("classifiers", [])
    pattern = re.compile(r"Programming Language :: Python :: (3\.\d+)")
    listed = {m.group(1) for c in classifiers if (m := pattern.fullmatch(c))}
    assert listed == set(TESTED_PYTHONS)


def test_readme_promises_the_tested_versions():
    readme = (ROOT / "README.md").read_text()
    claims = set(re.findall(r"Python (3\.\d+)", readme))
    assert claims and claims <= set(TESTED_PYTHONS), f"README names Python {sorted(claims)}"
    assert "or newer" not in readme.split("make lab")[0]  # no promise beyond what is tested


def test_license_is_an_spdx_expression_with_a_setuptools_that_reads_it():
    data = pyproject()
    assert data["project"]["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in data["project"].get("classifiers", []))  # setuptools refuses both
    floors = [Requirement(r) for r in data["build-system"]["requires"] if Requirement(r).name == "setuptools"]
    assert len(floors) == 1
    lowest = min((Version(s.version) for s in floors[0].specifier if s.operator in (">=", "==", "~=")), default=None)
    assert lowest is not None and lowest >= Version("77"), "setuptools >= 77 reads `license = \"MIT\"` (PEP 639)"


def test_conda_gets_nvvm_and_the_slim_builds():
    names = conda_names()
    assert names & NVVM_CARRIERS, "environment.yml lists no package that carries libNVVM"
    assert {"matplotlib-base", "nbconvert-core"} <= names
    assert not {"matplotlib", "nbconvert"} & names


# -- what each make target installs -----------------------------------------------------------

# Tools a learner never runs: the test runner and its plugins, the browser driver, the grader.
NOT_FOR_LEARNERS = {"pytest", "pytest-timeout", "nbval", "playwright", "nbgrader"}
NOT_FOR_TEACHERS = {"pytest", "pytest-timeout", "nbval", "playwright"}


def make_extras(target: str, tmp_path: Path, *variables: str) -> list[str]:
    """The extras that `make TARGET` installs, read from make's dry run (nothing is run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", "-B", target, f"VENV={tmp_path / 'venv'}", *variables],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found = re.findall(r'pip install -e "\.\[([^\]]+)\]"', done.stdout)
    assert len(found) == 1, f"`make {target}` should install the project once:\n{done.stdout}"
    return found[0].split(",")


def install_set(extras: list[str]) -> set[str]:
    """Every distribution that installing the project with ``extras`` brings, as far as this environment
    knows them: pyproject.toml's lists, then each package's own requirements (transitively)."""
    project = pyproject()["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        todo += [Requirement(r) for r in project["optional-dependencies"][extra]]
    seen, names = set(), set()
    while todo:
        req = todo.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(key[0])
        try:
            requires = metadata.distribution(req.name).requires or []
        except metadata.PackageNotFoundError:  # not installed here (another platform's, or the other CUDA extra's)
            continue
        for line in requires:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(dep)
    return names


def test_a_learners_lab_installs_no_test_or_teaching_tool(tmp_path: Path) -> None:
    extras = make_extras("lab", tmp_path)
    assert extras == ["lab", "cu13"]
    installed = install_set(extras)
    assert {"jupyterlab", "ipykernel", "numba", "numba-cuda", "cuda-toolkit"} <= installed
    assert not installed & NOT_FOR_LEARNERS, f"make lab installs {sorted(installed & NOT_FOR_LEARNERS)}"


def test_a_teachers_lab_adds_the_grader_but_no_test_tool(tmp_path: Path) -> None:
    installed = install_set(make_extras("teach", tmp_path))
    assert {"nbgrader", "nbconvert", "jupyterlab"} <= installed
    assert not installed & NOT_FOR_TEACHERS, f"make teach installs {sorted(installed & NOT_FOR_TEACHERS)}"


def test_make_test_installs_every_extra_but_the_other_cuda(tmp_path: Path) -> None:
    extras = set(make_extras("test", tmp_path))
    assert extras == set(pyproject()["project"]["optional-dependencies"]) - {"cu12"}
    assert set(make_extras("test", tmp_path, "CUDA=cu12")) == extras - {"cu13"} | {"cu12"}


def test_the_cuda_extra_is_checked_by_make(tmp_path: Path) -> None:
    done = subprocess.run(["make", "-n", "lab", f"VENV={tmp_path / 'venv'}", "CUDA=cu11"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "CUDA must be cu12" in done.stderr


def test_the_environment_remembers_its_cuda_extra_and_python(tmp_path: Path) -> None:
    """A .venv built for cu12 stays cu12 when nothing is named, and is built anew when cu13 is."""
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".built-with").write_text("CUDA=cu12 PYTHON=python3.12\n")
    for stamp in ("lab", "teach", "setup"):
        (venv / f".installed-{stamp}").touch()

    # A make of its own: under `make test VENV=... PYTHON=...` (CI's second Python) the outer make's
    # variables reach a child make through MAKEFLAGS and would override what .built-with says.
    alone = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}

    def dry(*variables: str) -> str:
        return subprocess.run(["make", "-n", "lab", f"VENV={venv}", *variables], cwd=ROOT, env=alone,
                              capture_output=True, text=True, timeout=60).stdout

    assert "pip install" not in dry(), "an up-to-date .venv is rebuilt"
    rebuilt = dry("CUDA=cu13")
    assert f"rm -rf {venv}" in rebuilt and 'pip install -e ".[lab,cu13]"' in rebuilt and "python3.12 -m venv" in rebuilt
    assert "python3.11 -m venv" in dry("PYTHON=python3.11")


def test_the_readme_states_the_measured_setup_size_and_time() -> None:
    makefile = (ROOT / "Makefile").read_text()
    size = re.search(r"^SETUP_SIZE := (.+)$", makefile, re.M).group(1).strip()
    time = re.search(r"^SETUP_TIME := (.+)$", makefile, re.M).group(1).strip()
    first_screen = (ROOT / "README.md").read_text().split("## ")[0]
    assert size in first_screen and time in first_screen, f"the README's first screen should say {size}, {time}"
