import os
import re
import subprocess
import sys

import pytest

import helpers
from helpers import backend


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != backend.SIMULATOR_ENV}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)


def test_this_process_agrees_with_the_choice_it_recorded():
    # numba's own switch, read once when numba loaded, must be the backend helpers chose. (The variable
    # helpers writes cannot be compared with its own choice: both come from one boolean. The user's
    # setting is followed through to numba in fresh processes below.)
    from numba.core import config

    assert bool(config.ENABLE_CUDASIM) == (helpers.BACKEND == backend.SIMULATOR)


@pytest.mark.parametrize("setting", ["1", "0"])
def test_a_users_setting_reaches_numba_and_the_banner_in_a_fresh_process(setting):
    simulator = setting == "1"
    usable = simulator or backend.gpu_available()  # "0" without a GPU: numba's GPU target, but no device to name
    code = "import helpers\nfrom numba.core import config\nprint(helpers.BACKEND, int(config.ENABLE_CUDASIM))\n"
    done = run_python(code + ("helpers.start()\n" if usable else ""), NUMBA_ENABLE_CUDASIM=setting)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == (["simulator", "1"] if simulator else ["gpu", "0"])
    if usable:
        assert lines[1] == "backend: simulator" if simulator else lines[1].startswith("backend: gpu (")


@pytest.mark.parametrize("has_gpu, setting, expected", [
    (False, None, backend.SIMULATOR),
    (True, None, backend.GPU),
    (True, "", backend.GPU),  # empty means "not asked", as numba reads it
    (True, "1", backend.SIMULATOR),
    (False, "0", backend.GPU),  # the user's explicit choice wins, even without a GPU found
])
def test_choose_backend_follows_the_hardware_unless_told(monkeypatch, has_gpu, setting, expected):
    monkeypatch.setattr(backend, "gpu_available", lambda: has_gpu)
    monkeypatch.delitem(sys.modules, "numba")  # as before numba is first imported (restored afterwards)
    if setting is None:
        monkeypatch.delenv(backend.SIMULATOR_ENV, raising=False)
    else:
        monkeypatch.setenv(backend.SIMULATOR_ENV, setting)
    assert backend.choose_backend() == expected
    assert os.environ[backend.SIMULATOR_ENV] == ("1" if expected == backend.SIMULATOR else "0")


def test_chosen_without_user_setting_in_a_fresh_process():
    done = run_python("import helpers, os; print(helpers.BACKEND, os.environ['NUMBA_ENABLE_CUDASIM'])")
    assert done.returncode == 0, done.stderr
    want = "gpu 0" if backend.gpu_available() else "simulator 1"
    assert done.stdout.split() == want.split()


@pytest.mark.parametrize("value, expected", [("1", "simulator"), ("yes", "simulator")])
def test_explicit_user_setting_is_respected(value, expected):
    done = run_python("import helpers; print(helpers.BACKEND)", NUMBA_ENABLE_CUDASIM=value)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_numba_imported_first_with_the_other_choice_is_a_clear_error():
    other = "1" if backend.gpu_available() else "0"
    code = (
        "import os\n"
        f"os.environ['NUMBA_ENABLE_CUDASIM'] = '{other}'\n"
        "import numba.cuda\n"
        "del os.environ['NUMBA_ENABLE_CUDASIM']\n"
        "import helpers\n"
    )
    done = run_python(code)
    assert done.returncode != 0
    assert "BackendError" in done.stderr
    assert "Restart the kernel" in done.stderr


def test_numba_imported_first_with_the_same_choice_is_fine():
    same = "0" if backend.gpu_available() else "1"
    code = f"import os\nos.environ['NUMBA_ENABLE_CUDASIM'] = '{same}'\nimport numba.cuda\nimport helpers\nprint(helpers.BACKEND)"
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("gpu" if same == "0" else "simulator")
    assert "BackendError" not in done.stderr


def test_banner_is_one_line_in_the_documented_form(capsys):
    helpers.start()
    line = capsys.readouterr().out.rstrip("\n")
    assert "\n" not in line
    assert re.fullmatch(r"backend: (simulator|gpu \(.+, \d+ SMs\))", line)
    assert ("simulator" in line) == helpers.is_simulator()


def test_numba_cuda_must_be_nvidias(monkeypatch):
    from numba import cuda

    monkeypatch.setattr(cuda, "implementation", "built-in", raising=False)
    with pytest.raises(backend.BackendError, match="numba-cuda"):
        backend.check_numba_cuda()


def test_environment_value_parsing():
    assert backend._env_requests_simulator(None) is None
    assert backend._env_requests_simulator("  ") is None
    assert backend._env_requests_simulator("0") is False
    assert backend._env_requests_simulator("1") is True
