"""The sweep's command line: every bad option ends in one usage error naming it, never a traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from helpers.harness import cli
from helpers.lessons.sweep import measure

ROOT = Path(__file__).resolve().parent.parent


def usage_error(argv, capsys):
    """Run the option parser; return argparse's error text (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.parse("helpers.lessons.sweep", measure.COMMANDS, argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_out_pointing_at_a_file_is_a_usage_error(tmp_path, capsys):
    target = tmp_path / "results.json"
    target.write_text("{}")
    assert f"--out {target} is a file, not a folder" in usage_error(["--out", str(target)], capsys)
    inside = target / "deeper"
    assert f"is inside {target}, which is a file" in usage_error(["--out", str(inside)], capsys)


def test_out_folder_that_exists_or_can_be_made_is_fine(tmp_path):
    def out(argv):
        return cli.parse("helpers.lessons.sweep", measure.COMMANDS, argv).out

    assert out(["--out", str(tmp_path)]) == tmp_path
    assert out(["--out", str(tmp_path / "new" / "folder")]) == tmp_path / "new" / "folder"


def test_the_command_line_gives_a_usage_error_not_a_traceback(tmp_path):
    target = tmp_path / "a_file"
    target.write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "helpers.lessons.sweep", "--out", str(target), "--no-overhead"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "is a file, not a folder" in done.stderr
    assert "usage: python -m helpers.lessons.sweep" in done.stderr


@pytest.mark.skipif(helpers.is_simulator(), reason="needs a GPU: its free memory is the limit")
def test_sizes_beyond_the_gpu_memory_are_a_usage_error(capsys):
    err = usage_error(["--sizes", "2^40"], capsys)
    assert "GiB of GPU memory" in err and "choose smaller --sizes" in err


@pytest.mark.skipif(not helpers.is_simulator(), reason="the simulator's own limit")
def test_sizes_beyond_the_simulator_are_a_usage_error(capsys):
    assert "too large for the CUDA simulator" in usage_error(["--sizes", "2^40"], capsys)
