"""The compiler switch (HELPERS_COMPILER) and the two-compiler record, checked without a GPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import backend as compiler
from helpers import results

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import compilers  # noqa: E402  (a run over every lesson's kernels, in scripts/)

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    paths = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=paths, **env))


@pytest.mark.parametrize("value, name", [(None, "numba-cuda"), ("", "numba-cuda"), ("mlir", "numba-cuda-mlir"),
                                         (" MLIR ", "numba-cuda-mlir"), ("numba-cuda", "numba-cuda")])
def test_the_variable_names_a_compiler(value, name, monkeypatch):
    if value is None:
        monkeypatch.delenv(compiler.COMPILER_ENV, raising=False)
        assert compiler.requested() == name
    else:
        assert compiler.requested(value) == name


def test_an_unknown_compiler_is_refused():
    with pytest.raises(compiler.CompilerError, match="names no compiler"):
        compiler.requested("clang")


def test_the_default_is_numba_cuda_and_the_simulator_refuses_mlir():
    default = _python("import helpers, numba.cuda; print(helpers.banner(), numba.cuda.implementation)",
                      NUMBA_ENABLE_CUDASIM="1", HELPERS_COMPILER="")
    assert default.stdout.split() == ["backend:", "simulator", "NVIDIA"], default.stderr
    mlir = _python("import helpers", NUMBA_ENABLE_CUDASIM="1", HELPERS_COMPILER="mlir")
    assert mlir.returncode != 0 and "needs a GPU: numba-cuda-mlir has no CUDA simulator" in mlir.stderr


def test_numba_imported_first_is_refused_not_half_switched():
    with pytest.raises(compiler.CompilerError, match="numba was imported before helpers"):
        compiler.install(compiler.MLIR, simulator=False)  # numba is loaded in this process


def test_numba_names_map_to_mlir_modules_or_are_refused():
    assert compiler._target("numba.cuda") == "numba_cuda_mlir.cuda"
    assert compiler._target("numba") is None
    assert compiler._target("numba.core") == ""  # a stand-in that looks in both of its homes
    with pytest.raises(ImportError, match="numba.np.ufunc has no counterpart in numba-cuda-mlir"):
        compiler._target("numba.np.ufunc")


def _record() -> compilers.Compilers:
    def run(name: str, verdict: str) -> compilers.CompilerRun:
        return compilers.CompilerRun(name, "1.0", [compilers.KernelCheck("03", "fused", True, verdict)],
                                     {"fused": {str(n): 1.0 for n in compilers.SIZES}},
                                     [compilers.CellCheck("01_three_kernels.ipynb", 4, True)])
    return compilers.Compilers(runs=[run("numba-cuda", "bitwise"), run("numba-cuda-mlir", "differs")])


def test_the_record_round_trips_and_its_table_names_both_compilers(tmp_path):
    record = _record()
    results.save(record, tmp_path)
    again = results.load(compilers.Compilers, tmp_path)
    assert again.runs[1].kernels[0].verdict == "differs"
    text = compilers.table(again)
    assert "numba-cuda 1.0" in text and "numba-cuda-mlir 1.0" in text and "03 fused" in text
    assert "1 of 1 checked notebook cells as committed" in text


def test_a_lessons_cells_run_and_are_compared_with_the_committed_outputs(tmp_path):
    notebook = {"cells": [{"cell_type": "code", "source": ["# NBVAL_CHECK_OUTPUT\n", "print(6 * 7)"],
                           "outputs": [{"name": "stdout", "output_type": "stream", "text": ["42\n"]}]},
                          {"cell_type": "code", "source": ["# NBVAL_CHECK_OUTPUT\n", "print(6 * 8)"],
                           "outputs": [{"name": "stdout", "output_type": "stream", "text": ["42\n"]}]},
                          {"cell_type": "code", "source": ["1 / 0"], "outputs": []}]}
    path = tmp_path / "99_probe.ipynb"
    path.write_text(json.dumps(notebook))
    checks = compilers.run_notebook(path)
    assert [c.same_as_committed for c in checks] == [True, False, False]
    assert "ZeroDivisionError" in checks[2].detail


def test_the_entry_point_has_help():
    done = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "scripts" / "compilers.py"), "--help"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0 and "numba-cuda-mlir" in done.stdout


def test_the_docs_tables_are_the_committed_records():
    record = results.load(compilers.Compilers, ROOT / "results" / "h200")
    text = compilers.DOC.read_text()
    assert compilers.doc_text(record, text) == text, "run: python scripts/compilers.py --doc --out results/h200"
    assert {r.compiler for r in record.runs} == {"numba-cuda", "numba-cuda-mlir"}
    assert record.provenance.device == "NVIDIA H200"


def test_the_doc_check_fails_on_a_stale_doc_and_writes_nothing(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "compilers.md"
    stale.write_text(compilers.DOC.read_text().replace(compilers.BEGIN, compilers.BEGIN + "\na row no record has", 1))
    monkeypatch.setattr(compilers, "DOC", stale)
    before = stale.read_text()
    assert compilers.main(["--doc", "--check", "--out", str(ROOT / "results" / "h200")]) == 1
    assert stale.read_text() == before and "out of date" in capsys.readouterr().out


def test_a_kernel_that_does_not_run_is_footnoted_with_its_reason():
    record = _record()
    record.runs[1].kernels[0] = compilers.KernelCheck("03", "fused", False, "Unavailable", "no intrinsic here")
    table = compilers.markdown(record)
    assert "| 03 | fused | bitwise | does not run [1] |" in table and "[1] no intrinsic here" in table
