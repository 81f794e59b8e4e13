"""The README's figures are the committed H200 results, rendered, never typed in."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_figures_match_the_committed_results():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_figures.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_figure_names_where_it_was_measured():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- figures:start -->")[1].split("<!-- figures:end -->")[0]
    assert "NVIDIA H200" in block and "numba-cuda" in block and "2026-" in block
