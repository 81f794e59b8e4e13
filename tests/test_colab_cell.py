"""The notebooks' first cell on a simulated Colab: which extra it installs, once, and then the import.

Each case runs :data:`helpers.friendly.FIRST_CELL` in a fresh virtual environment that has
numba and the rest (borrowed from this one, see ``venv_support``) but not ``helpers``, as on
Colab before the cell has run.  ``COLAB_RELEASE_TAG`` is set, ``HOME`` (where the cell leaves
its mark) is a temporary folder, ``PATH`` holds only a fake ``nvidia-smi`` (or none), and a
fake ``pip`` module comes first on ``PYTHONPATH``: it records its arguments and "installs"
the project by linking this checkout's ``helpers`` into the environment.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from helpers import friendly
from venv_support import ROOT, outside_env, venv_with_deps

FAKE_PIP = '''import json, os, sys, sysconfig
from pathlib import Path

with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
target = Path(sysconfig.get_paths()["purelib"]) / "helpers"
if not target.exists():
    target.symlink_to(os.environ["FAKE_PIP_PROJECT"], target_is_directory=True)
'''

# The first lines of `nvidia-smi` as a CUDA 12 and a CUDA 13 driver print them.
SMI_HEADER = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+
"""
NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
BANNER = re.compile(r"^backend: simulator$", re.M)


class FakeColab:
    """A Colab-like runtime without the project: its own venv, HOME, PATH and pip log."""

    def __init__(self, folder: Path, smi: str | None, smi_status: int = 0) -> None:
        self.folder = folder
        self.python = venv_with_deps(folder / "venv")
        self.home, self.bin, self.fakes = folder / "home", folder / "bin", folder / "fakes"
        for path in (self.home, self.bin, self.fakes / "pip"):
            path.mkdir(parents=True)
        (self.fakes / "pip" / "__init__.py").write_text("")
        (self.fakes / "pip" / "__main__.py").write_text(FAKE_PIP)
        if smi is not None:
            script = self.bin / "nvidia-smi"
            # shell builtins only: PATH holds nothing else
            script.write_text(f"#!/bin/sh\nwhile IFS= read -r line; do echo \"$line\"; done <<'EOF'\n{smi}\nEOF\n"
                              f"exit {smi_status}\n")
            script.chmod(0o755)
        self.log = folder / "pip.log"

    def run_first_cell(self, colab: bool = True) -> subprocess.CompletedProcess:
        env = outside_env(HOME=str(self.home), PATH=str(self.bin), PYTHONPATH=str(self.fakes),
                          FAKE_PIP_LOG=str(self.log), FAKE_PIP_PROJECT=str(ROOT / "helpers"),
                          NUMBA_ENABLE_CUDASIM="1")
        env.pop("COLAB_RELEASE_TAG", None)
        if colab:
            env["COLAB_RELEASE_TAG"] = "release-colab-test"
        return subprocess.run([str(self.python), "-c", friendly.FIRST_CELL], cwd=self.folder, env=env,
                              capture_output=True, text=True, timeout=300)

    def pip_calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    @property
    def mark(self) -> Path:
        return self.home / Path(friendly.INSTALLED_MARK).relative_to("~")


def requirement(extra: str) -> str:
    return f"{friendly.DISTRIBUTION}[{extra}] @ git+{friendly.REPOSITORY}"


DRIVERS = {
    "cuda 12 driver": (SMI_HEADER.format(driver="550.54.15", cuda="12.4"), 0, "cu12"),
    "cuda 13 driver": (SMI_HEADER.format(driver="580.82.07", cuda="13.0"), 0, "cu13"),
    "nvidia-smi without a driver": (NO_DRIVER, 9, "cu13"),
    "no nvidia-smi": (None, 0, "cu13"),
}


@pytest.mark.parametrize("case", sorted(DRIVERS))
def test_colab_installs_the_extra_of_its_driver_once_then_imports(case: str, tmp_path: Path) -> None:
    smi, status, extra = DRIVERS[case]
    colab = FakeColab(tmp_path, smi, status)
    first = colab.run_first_cell()
    assert first.returncode == 0, first.stderr[-3000:]
    assert colab.pip_calls() == [["install", "-q", requirement(extra)]], f"{case}: pip was asked {colab.pip_calls()}"
    assert colab.mark.read_text() == extra
    assert BANNER.search(first.stdout), first.stdout

    again = colab.run_first_cell()  # the same runtime, the cell run a second time
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(colab.pip_calls()) == 1, "the second run installed again despite the mark"
    assert BANNER.search(again.stdout) and "installing" not in again.stdout


def test_without_colab_a_missing_project_is_explained_not_installed(tmp_path: Path) -> None:
    colab = FakeColab(tmp_path, SMI_HEADER.format(driver="580.82.07", cuda="13.0"))
    done = colab.run_first_cell(colab=False)
    assert done.returncode != 0 and colab.pip_calls() == []
    assert "ModuleNotFoundError: 'helpers' cannot be imported" in done.stderr and "`make lab`" in done.stderr
    assert not colab.mark.exists()


def test_in_the_projects_environment_it_only_imports(tmp_path: Path) -> None:
    colab = FakeColab(tmp_path, None)
    site = Path(subprocess.run([str(colab.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "helpers").symlink_to(ROOT / "helpers", target_is_directory=True)
    done = colab.run_first_cell(colab=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert colab.pip_calls() == [] and done.stdout.strip() == "backend: simulator"
