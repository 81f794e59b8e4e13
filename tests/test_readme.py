"""A newcomer's first ten minutes: the README's commands, as written, in a fresh clone.

The repository is cloned into a temporary folder (so only what is committed is
tested, as a newcomer would get it), the shell commands are read from the
README's ```bash blocks, and each one is run in the order the README gives them:

* ``make lab`` really builds the environment and starts JupyterLab (with
  ``LAB_ARGS`` that keep it headless on a free loopback port with a token); the test
  waits until it serves ``/lab`` and lists the notebooks through its REST API, then
  stops it;
* ``make test`` runs with ``PYTEST_ARGS=--collect-only`` (running the whole suite from
  inside the suite would recurse): every test and notebook must be collected;
* ``make bench`` and ``make html`` run for real (the bench is a tiny sweep without a GPU);
* ``make clean`` and ``make lab CUDA=cu12`` are checked with ``make -n`` (they would
  delete or rebuild the environment), and the CUDA 12 install of the learner's extras is
  resolved with ``pip install --dry-run``;
* the conda block is checked against ``environment.yml`` (conda itself is not here).

A command the test does not know fails it: a README edit must come with its check.
Set ``README_TEST_OVERLAY=1`` to lay the working tree's uncommitted files over the
clone (to try a README before committing it).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from lab_support import free_port, isolated_jupyter_env, new_token, start_lab

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
SETUP_AND_START_S = 1200  # a fresh venv from the package registries, then the server


@dataclass(frozen=True)
class Command:
    """One README command: its words, and the block it stands in (for context)."""

    words: tuple[str, ...]
    block: int

    @property
    def text(self) -> str:
        return shlex.join(self.words)


def readme_commands(readme: str) -> list[Command]:
    """The commands of the README's shell blocks, in order, comments dropped."""
    commands = []
    for number, match in enumerate(FENCE.finditer(readme)):
        if match.group(1).lower() not in SHELL_LANGUAGES:
            continue
        for line in match.group(2).splitlines():
            words = shlex.split(line.removeprefix("$ "), comments=True)
            if words:
                commands.append(Command(tuple(words), number))
    return commands


def _why_skip() -> str | None:
    if not (ROOT / ".git").exists():
        return "not a git checkout: the README test clones the repository"
    for tool in ("git", "make"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "not the project's dev environment (no JupyterLab; `make setup` installs it)"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why_skip() is not None, reason=str(_why_skip()))]


def test_commands_are_read_from_code_blocks() -> None:
    text = "intro\n```bash\nmake lab   # go\n$ make test\n```\n```text\nbackend: simulator\n```\n```sh\nconda env create -f environment.yml\n```\n"
    assert [c.text for c in readme_commands(text)] == ["make lab", "make test", "conda env create -f environment.yml"]


# -- the clone -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of the committed repository (plus the working tree if asked)."""
    folder = tmp_path_factory.mktemp("readme") / "three-kernels-or-one"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(folder)], check=True)
    if os.environ.get("README_TEST_OVERLAY") == "1":
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
        for name in filter(None, listed):
            if (ROOT / name).is_file():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, folder / name)
    assert (folder / "README.md").exists(), "README.md is not committed"
    return folder


def newcomer_env(home: Path) -> dict[str, str]:
    """A shell as a newcomer has it: no project venv on PATH, no backend forced."""
    env = isolated_jupyter_env(home)
    outer = Path(sys.prefix)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not Path(p).resolve().is_relative_to(outer.resolve()))
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "NUMBA_ENABLE_CUDASIM", "PYTEST_ADDOPTS", "MAKEFLAGS", "MAKELEVEL"):
        env.pop(name, None)
    return env


def run(command: list[str], clone: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, (f"`{shlex.join(command)}` exited with {result.returncode}:\n"
                                    f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


# -- what each README command must do -------------------------------------------------------------

def check_make_lab(clone: Path, env: dict[str, str], home: Path, extra: list[str]) -> None:
    """`make lab` builds the environment, then JupyterLab serves the notebooks; then it is stopped."""
    port, token = free_port(), new_token()
    lab_args = ["--no-browser", f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
                "--ServerApp.port_retries=0", "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    # No --allow-root here: as root (CI), `make lab` must add it by itself.
    command = ["make", *extra, f"LAB_ARGS={' '.join(lab_args)}"]
    server = start_lab(command, port=port, token=token, cwd=clone, env=env, log=home / "make_lab.log")
    try:
        server.wait_until_serving(timeout=SETUP_AND_START_S)
        status, page = server.get("/lab")
        assert status == 200 and b"JupyterLab" in page, f"/lab answered {status}"
        # `jupyter lab notebooks/` serves that folder as the root; a plain `jupyter lab`, the project.
        listing = server.api("GET", "/api/contents")
        if any(item["name"] == "notebooks" and item["type"] == "directory" for item in listing["content"]):
            listing = server.api("GET", "/api/contents/notebooks")
        served = {item["name"] for item in listing["content"]}
        committed = {p.name for p in (clone / "notebooks").glob("[0-9]*.ipynb")}
        assert committed and committed <= served, f"JupyterLab lists {sorted(served)}"
        kernels = server.api("GET", "/api/kernelspecs")["kernelspecs"]
        names = {spec["spec"]["display_name"] for spec in kernels.values()}
        assert "Python (three kernels or one)" in names, f"kernels offered: {sorted(names)}"
    finally:
        server.stop()
    assert server.process.returncode is not None


def check_command(command: Command, clone: Path, home: Path) -> None:
    env = newcomer_env(home)
    words = list(command.words)
    if words[0] == "make":
        targets = [w for w in words[1:] if "=" not in w]
        variables = [w for w in words[1:] if "=" in w]
        assert len(targets) == 1, f"one make target per README command, got {command.text!r}"
        target = targets[0]
        if target == "lab" and any(v.startswith("CUDA=") for v in variables):
            cuda = next(v for v in variables if v.startswith("CUDA=")).split("=", 1)[1]
            dry = run(["make", "-n", "-B", *words[1:]], clone, env, 60).stdout
            assert f'.[lab,{cuda}]' in dry and "jupyter lab" in dry, dry
            run(["make", "setup"], clone, env, SETUP_AND_START_S)
            run([".venv/bin/python", "-m", "pip", "install", "--dry-run", "--quiet", "-e", f".[lab,{cuda}]"], clone, env, 600)
        elif target == "lab":
            assert not variables, f"extend tests/test_readme.py for {command.text!r}"
            check_make_lab(clone, env, home, ["lab"])
        elif target == "test":
            out = run([*words, "PYTEST_ARGS=--collect-only -q"], clone, env, SETUP_AND_START_S).stdout
            collected = re.search(r"(\d+) tests? collected", out)
            assert collected and int(collected.group(1)) > 0, out[-2000:]
        elif target == "clean":
            dry = run(["make", "-n", *words[1:]], clone, env, 60).stdout
            assert "rm -rf .venv" in dry, dry
        elif target == "bench":
            run(words, clone, env, 900)
            assert list((clone / "results").glob("*/bench_sweep.json")), "make bench wrote no results"
        elif target == "html":
            run(words, clone, env, 600)
            assert (clone / "build" / "html" / "index.html").exists()
        else:
            pytest.fail(f"README command {command.text!r} is not covered by tests/test_readme.py")
    elif words[0] in ("conda", "pip", "python", "jupyter") and _in_conda_block(command, clone):
        check_conda_step(words, clone)
    else:
        pytest.fail(f"README command {command.text!r} is not covered by tests/test_readme.py")


def _in_conda_block(command: Command, clone: Path) -> bool:
    return any(c.block == command.block and c.words[0] == "conda" for c in readme_commands(_readme(clone)))


def check_conda_step(words: list[str], clone: Path) -> None:
    """conda is not installed here: check each step against the files it uses."""
    import yaml

    spec = yaml.safe_load((clone / "environment.yml").read_text())
    if words[:3] == ["conda", "env", "create"]:
        assert words[words.index("-f") + 1] == "environment.yml"
        assert spec["name"] and "conda-forge" in spec["channels"]
    elif words[:2] == ["conda", "activate"]:
        assert words[2] == spec["name"], f"environment.yml names the environment {spec['name']!r}"
    elif words[:2] == ["pip", "install"]:
        assert "-e" in words and "--no-deps" in words and (clone / "pyproject.toml").exists()
    elif words[:3] == ["python", "-m", "ipykernel"]:
        assert "ipykernel" in " ".join(str(d) for d in spec["dependencies"])
        assert words[words.index("--display-name") + 1] == "Python (three kernels or one)"
    elif words[:2] == ["jupyter", "lab"]:
        assert all((clone / w).is_dir() for w in words[2:] if not w.startswith("-"))
    else:
        pytest.fail(f"conda step {shlex.join(words)!r} is not covered by tests/test_readme.py")


def _readme(clone: Path) -> str:
    return (clone / "README.md").read_text()


# -- the test --------------------------------------------------------------------------------------

def test_readme_commands_work_in_a_fresh_clone(clone: Path, tmp_path: Path) -> None:
    commands = readme_commands(_readme(clone))
    first = [c.text for c in commands[:2]]
    assert first == ["make lab", "make test"], f"the README should open with `make lab` and `make test`, not {first}"
    for command in commands:
        check_command(command, clone, tmp_path)
