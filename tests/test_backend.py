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


def test_backend_follows_the_hardware():
    expected = backend.GPU if backend.gpu_available() else backend.SIMULATOR
    if os.environ.get(backend.SIMULATOR_ENV) in (None, ""):
        assert helpers.BACKEND == expected
    assert helpers.is_simulator() == (helpers.BACKEND == backend.SIMULATOR)


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
