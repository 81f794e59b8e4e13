"""Two GPUs: clear refusals with fewer, exact byte accounting, the topology parser, the CLI."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import helpers
import helpers.checks
from helpers.lessons.transfers import measure, multigpu

two_gpus = pytest.mark.skipif(multigpu.gpu_count() < 2, reason="needs two GPUs")
fewer_than_two = pytest.mark.skipif(multigpu.gpu_count() >= 2, reason="behaviour with fewer than two GPUs")
ROOT = Path(__file__).resolve().parent.parent

# Parser fixture: written for these tests in the layout of `nvidia-smi topo -m`
# (tab-separated; a two-GPU NVLink host). Not output captured from a machine.
TOPO_NVLINK = (
    "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\t0-31\t0\t\tN/A\n"
    "GPU1\tNV18\t X \t0-31\t0\t\tN/A\n"
    "\n"
    "Legend:\n\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
)
# Parser fixture: four GPUs over PCIe, a NIC column, colour codes, space-separated.
TOPO_PCIE = (
    "        \x1b[4mGPU0    GPU1    GPU2    GPU3    NIC0    CPU Affinity\x1b[0m\n"
    "GPU0     X      PIX     SYS     SYS     NODE    0-15\n"
    "GPU1    PIX      X      SYS     SYS     NODE    0-15\n"
    "GPU2    SYS     SYS      X      PXB     SYS     16-31\n"
    "GPU3    SYS     SYS     PXB      X      SYS     16-31\n"
    "NIC0    NODE    NODE    SYS     SYS      X\n"
)


def test_topology_parser_reads_an_nvlink_pair():
    assert multigpu.parse_topology(TOPO_NVLINK) == {(0, 1): "NV18", (1, 0): "NV18"}


def test_topology_parser_reads_pcie_paths_and_ignores_nics():
    matrix = multigpu.parse_topology(TOPO_PCIE)
    assert len(matrix) == 12
    assert matrix[(0, 1)] == "PIX" and matrix[(2, 3)] == "PXB" and matrix[(1, 3)] == "SYS"
    assert all(code != "NODE" for code in matrix.values())  # the NIC column is not a GPU


def test_topology_parser_names_what_is_missing():
    with pytest.raises(ValueError, match="GPU0"):
        multigpu.parse_topology("No devices were found\n")


@pytest.mark.parametrize("code, kind, words", [
    ("NV18", "NVLink", "18 bonded links"),
    ("NV4", "NVLink", "4 bonded links"),
    ("PIX", "PCIe", "one PCIe switch"),
    ("SYS", "PCIe", "NUMA"),
    ("XYZ", "unknown", "XYZ"),
])
def test_link_codes_are_described(code, kind, words):
    link = multigpu.describe_link(code)
    assert link["code"] == code and link["kind"] == kind and words in link["description"]


def test_link_between_without_nvidia_smi_says_so(monkeypatch):
    monkeypatch.setattr(multigpu.shutil, "which", lambda name: None)
    assert multigpu.link_between(0, 1) == {"code": None, "kind": "unknown", "description": "nvidia-smi not found"}


def test_link_between_reads_the_matrix(monkeypatch):
    monkeypatch.setattr(multigpu.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(multigpu.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=TOPO_PCIE, stderr=""))
    assert multigpu.link_between(2, 3)["kind"] == "PCIe"
    assert "not in the matrix" in multigpu.link_between(0, 7)["description"]


def test_link_bytes_come_from_sizes_and_dtypes():
    assert multigpu.link_bytes([]) == 0
    assert multigpu.link_bytes([np.zeros(1000, np.float32)]) == 4000
    assert multigpu.link_bytes([np.zeros((3, 5), np.float64), np.zeros(7, np.float16)]) == 3 * 5 * 8 + 7 * 2
    with pytest.raises(TypeError, match="list"):
        multigpu.link_bytes([[1.0, 2.0]])


@two_gpus
def test_the_split_sends_one_float32_intermediate_across():
    n = 1000 + 3  # not a multiple of 256
    split = multigpu.split_pipeline(n, repeats=3)  # checks its result against NumPy before timing
    assert split is not None
    assert split["n"] == n
    assert split["link_bytes"] == 4 * n  # t1 only: 4 bytes per element, against 16 through device memory
    assert split["link_bytes_per_element"] == 4
    assert {"split", "three kernels", "fused"} <= set(split["timings"])


@fewer_than_two
def test_the_split_refuses_with_fewer_than_two_gpus(capsys):
    assert multigpu.split_pipeline(1000 + 3) is None
    said = capsys.readouterr().out.strip()
    found = multigpu.gpu_count()
    where = " (the CUDA simulator)" if helpers.is_simulator() else ""
    assert said == f"skipped: needs two GPUs; found {found}{where}"
    if not helpers.is_simulator():
        assert found == 1  # a GPU machine with one device says so


@fewer_than_two
def test_every_measurement_refuses_and_says_why(capsys):
    found = multigpu.gpu_count()
    assert multigpu.peer_access(0, 1) is False
    assert multigpu.peer_copy_bandwidth(4096) is None
    assert multigpu.peer_copy_bandwidth(4096, allow_peer=False) is None
    assert multigpu.split_pipeline(1000) is None
    assert measure.measure_two_gpus() is None
    said = capsys.readouterr().out
    assert said.count(f"needs two GPUs; found {found}") == 4


def test_simulator_counts_no_gpus():
    if helpers.is_simulator():
        assert multigpu.gpu_count() == 0
    else:
        assert multigpu.gpu_count() == len(cuda.gpus) >= 1


@pytest.mark.parametrize("nbytes", [0, 6, 4097])
def test_bad_sizes_are_named(nbytes):
    with pytest.raises(ValueError, match="positive multiple of 4"):
        multigpu.peer_copy_bandwidth(nbytes)
    with pytest.raises(ValueError, match="positive multiple of 4"):
        measure.measure_two_gpus(nbytes)


def test_split_needs_elements():
    with pytest.raises(ValueError, match="n must be positive"):
        multigpu.split_pipeline(0)


@fewer_than_two
def test_cli_exits_cleanly_with_the_message():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "helpers.lessons.transfers", "two-gpus"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"needs two GPUs; found {multigpu.gpu_count()}" in done.stdout
    assert "nothing written" in done.stdout


@fewer_than_two
def test_script_is_a_quick_dry_run():
    # the script calls `python3`: put this interpreter's folder first on PATH
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "scripts/gpu/08_two_gpus.sh"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "needs two GPUs; found" in done.stdout


@pytest.fixture
def two_fake_gpus(monkeypatch):
    """In the simulator: pretend its one device is two, to run the two-GPU code paths."""
    if not helpers.is_simulator():
        pytest.skip("fakes two GPUs out of the simulator's one")
    monkeypatch.setattr(multigpu, "gpu_count", lambda: 2)
    monkeypatch.setattr(cuda, "gpus", [cuda.gpus[0], cuda.gpus[0]])


@pytest.mark.parametrize("peer", [True, False])
def test_split_runs_checks_and_counts_what_crossed(two_fake_gpus, monkeypatch, capsys, peer):
    monkeypatch.setattr(multigpu, "enable_peer_access", lambda src, dst: peer)
    n = 300  # not a multiple of 256
    record = multigpu.split_pipeline(n)
    assert record["link_bytes"] == 4 * n and record["link_bytes_per_element"] == 4
    assert record["path"] == ("peer (direct)" if peer else "staged through pinned host memory")
    assert record["timings"] == {}  # the simulator times nothing...
    assert capsys.readouterr().out.count("timing skipped") == 3  # ...and says so each time


def test_split_catches_an_intermediate_that_never_arrived(two_fake_gpus, monkeypatch):
    monkeypatch.setattr(multigpu, "enable_peer_access", lambda src, dst: True)
    monkeypatch.setattr(multigpu, "_cross", lambda *args: None)  # a copy that does nothing
    with pytest.raises(helpers.checks.CheckFailed, match="never written"):
        multigpu.split_pipeline(300)


@pytest.mark.parametrize("peer", [True, False])
def test_copy_between_fake_cards_arrives_but_is_not_timed(two_fake_gpus, monkeypatch, capsys, peer):
    monkeypatch.setattr(multigpu, "enable_peer_access", lambda src, dst: peer)
    assert multigpu.peer_copy_bandwidth(4096) is None
    assert "timing skipped" in capsys.readouterr().out


# --- on two GPUs -----------------------------------------------------------------------

@two_gpus
@pytest.mark.parametrize("allow_peer", [True, False])
@pytest.mark.parametrize("src, dst", [(0, 1), (1, 0)])
def test_gpu_copy_between_cards_is_plausible(src, dst, allow_peer):
    row = multigpu.peer_copy_bandwidth(64 * 2**20, src, dst, repeats=5, allow_peer=allow_peer)
    assert row["nbytes"] == 64 * 2**20 and 1 < row["gbs"] < 2000
    direct = allow_peer and multigpu.peer_access(src, dst)
    assert row["path"] == ("peer (direct)" if direct else "staged through pinned host memory")


@two_gpus
def test_gpu_split_pipeline_is_checked_timed_and_counted():
    n = 2**20 + 3
    record = multigpu.split_pipeline(n, repeats=5)
    assert record["link_bytes"] == 4 * n and record["link_bytes_per_element"] == 4
    assert set(record["timings"]) == {"split", "three kernels", "fused"}
    assert all(row["median_ms"] > 0 for row in record["timings"].values())


@two_gpus
def test_gpu_same_card_twice_is_refused():
    with pytest.raises(ValueError, match="two different GPUs"):
        multigpu.peer_copy_bandwidth(4096, 1, 1)
