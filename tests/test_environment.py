"""environment.yml (conda-forge) and pyproject.toml (pip) must describe the same environment."""

import re
from pathlib import Path

import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent
# conda packages with no pip twin: the interpreter, pip itself, the CUDA version selector and NVVM,
# which pip gets through numba-cuda's cu12/cu13 extras instead.
CONDA_ONLY = {"python", "pip", "cuda-version", "cuda-nvcc-tools"}


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
        found[name] = spec
    return found


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


def test_numpy_below_2_5_for_numba_cuda():
    # numba-cuda 0.30.4 calls np.row_stack, which numpy 2.5 removed.
    assert "2.5" not in pip_requirements()["numpy"]
    assert "2.4.9" in pip_requirements()["numpy"]
