"""environment.yml (conda-forge) and pyproject.toml (pip) must describe the same environment."""

import re
import sys
from pathlib import Path

import tomllib
import yaml
from packaging.requirements import Requirement
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
TESTED_PYTHONS = {"3.11": "CI and the development machines", "3.12": "the H200 image"}


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
