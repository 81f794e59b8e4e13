"""The lessons' shared measurement harness: the peers (helpers.harness.peers) and the check-then-time loop
(helpers.harness.campaign), and the kit functions under them (pipeline.launch_three, device occupancy)."""

from __future__ import annotations

import argparse
import re

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers import device, pipeline
from helpers.checks import CheckFailed
from helpers.harness import campaign, peers
from helpers.harness.device_checks import poison_on_device
from helpers.ledger import Ledger
from helpers.validate import kernel_function


# --- sizes and options ------------------------------------------------------------------------------


def test_sizes_are_read_from_powers_ranges_and_numbers():
    assert campaign.parse_sizes("2^10..2^12") == [1024, 2048, 4096]
    assert campaign.parse_sizes("2^10..2^14:2") == [1024, 4096, 16384]
    assert campaign.parse_sizes("1000, 2^4,1000") == [16, 1000]
    assert campaign.parse_sizes("2^10..2^14:2,1000") == [1000, 1024, 4096, 16384]


@pytest.mark.parametrize("text, message", [
    ("abc", "cannot read size 'abc'"),
    ("2^x", "cannot read size '2\\^x'"),
    ("2^5..2^3", "LOW <= HIGH"),
    ("2^14..2^10", "LOW <= HIGH"),
    ("0", "positive"),
    (" , ", "no sizes"),
])
def test_bad_sizes_are_named(text, message):
    with pytest.raises(ValueError, match=message):
        campaign.parse_sizes(text)


def test_absurd_exponents_are_refused_before_anything_is_computed():
    with pytest.raises(ValueError, match=r"2\^100 elements is far more than any GPU's memory"):
        campaign.parse_sizes("2^100")
    with pytest.raises(ValueError, match=r"2\^99 elements"):
        campaign.parse_sizes("2^10..2^99")  # would otherwise build a list of 90 enormous sizes


def test_implementations_are_checked_by_name():
    assert campaign.parse_keys("all", ["a", "b"]) == ["a", "b"]
    assert campaign.parse_keys("b,a,b", ["a", "b"]) == ["b", "a"]
    with pytest.raises(ValueError, match="unknown implementation.*bogus.*choose from a, b"):
        campaign.parse_keys("a,bogus", ["a", "b"])


def test_the_shared_options_give_usage_errors_naming_the_option(capsys):
    parser = argparse.ArgumentParser(prog="x")
    campaign.add_options(parser, ["a", "b"], repeats=7)
    args = parser.parse_args([])
    assert args.sizes == campaign.default_sizes() and args.impl == ["a", "b"] and args.repeats == 7
    for argv, message in ((["--impl", "nope"], "unknown implementation"), (["--repeats", "0"], "repeats must be >= 1"),
                          (["--sizes", "2^x"], "cannot read size")):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert message in capsys.readouterr().err


@pytest.mark.skipif(not helpers.is_simulator(), reason="the simulator's own limit")
def test_sizes_beyond_the_simulator_are_refused():
    with pytest.raises(ValueError, match="too large for the CUDA simulator"):
        campaign.check_sizes([2**40])


# --- the loop ---------------------------------------------------------------------------------------


def _half_written(pool):
    """A deliberately wrong implementation: the fused kernel on the first half only."""
    def case(n):
        a, b, c, _, _, out = pool.views(n)
        half = n // 2
        return campaign.Case(lambda: pipeline.launch_fused(a[:half], b[:half], c[:half], pool.s, out[:half]),
                             lambda: out, lambda: poison_on_device(out))

    return case


def test_a_wrong_implementation_is_dropped_with_its_reason_and_never_timed():
    sizes = [256, 512]
    pool = campaign.Pool(max(sizes))
    prepared = peers.prepare({"half": _half_written, "fused": peers.numba_fused, "three": peers.numba_three,
                              "numpy": peers.numpy_host, "cupy": peers.cupy_elementwise}, pool, say=False)
    if helpers.is_simulator():
        assert set(prepared.builders) == {"half", "fused", "three", "numpy"}
        assert prepared.absent == {"cupy": "cupy needs a GPU (this is the simulator)"}
    checks, timed, sizes_done = [], [], []
    failed = campaign.run_cases(prepared.builders, sizes, pool=pool, report=checks.append,
                                time=lambda label, n, case: timed.append((label, n)), checkpoint=sizes_done.append,
                                progress=False)
    assert list(failed) == ["half"] and "never written" in failed["half"]
    assert [(c.label, c.n, c.passed) for c in checks if c.label == "half"] == [("half", 509, False)]  # odd size first
    assert {("fused", 509), ("fused", 256), ("fused", 512), ("numpy", 512)} <= {(c.label, c.n) for c in checks if c.passed}
    assert all(label != "half" for label, _ in timed) and ("three", 512) in timed
    assert sizes_done == sizes and "half" not in prepared.builders
    assert all(c.poisoned for c in checks if c.passed and c.label != "numpy")
    assert not [c for c in checks if c.label == "numpy" and c.poisoned]  # a fresh host array each call


def test_verify_reports_the_first_bad_element():
    n = 300
    expected = cuda.to_device(np.ones(n, np.float32))
    out = cuda.to_device(np.ones(n, np.float32))

    def run():
        out[7:8].copy_to_device(np.array([5.0], np.float32))

    case = campaign.Case(run, lambda: out, lambda: None, expected)
    with pytest.raises(CheckFailed, match="element 7"):
        campaign.verify(case, "broken", n)


def test_the_device_copy_is_checked_against_its_input():
    pool = campaign.Pool(300)
    if helpers.is_simulator():
        pytest.skip("a library copy needs CuPy or PyTorch, or Numba's copy on a GPU")
    case = peers.device_copy(pool)(300)
    assert campaign.verify(case, "copy", 300)


# --- the peers --------------------------------------------------------------------------------------


def test_a_peer_that_cannot_run_here_says_why():
    why = "needs a GPU (this is the simulator)" if helpers.is_simulator() else "is not installed"
    with pytest.raises(peers.Unavailable, match=re.escape(f"a_module_that_does_not_exist {why}")):
        peers.require_gpu_module("a_module_that_does_not_exist")


def test_torch_compile_is_configured_in_one_place_and_says_how():
    assert peers.TORCH_COMPILE == {"dynamic": True}
    assert peers.describe_torch_compile() == "torch.compile(dynamic=True)"
    assert peers.describe_torch_compile("reduce-overhead") == "torch.compile(dynamic=True, mode='reduce-overhead')"
    assert peers.describe_torch_compile(dynamic=False) == "torch.compile(dynamic=False)"


def test_one_count_of_both_pipelines():
    counted = peers.count_pipelines()
    three, fused = counted["three kernels"], counted["fused"]
    assert (len(three.launches), three.trips, three.bytes_per_element()) == (3, 6, 32.0)
    assert (len(fused.launches), fused.trips, fused.bytes_per_element()) == (1, 2, 16.0)
    assert three.round_trips() == ["t1", "t2"]


def test_launch_three_is_the_one_sequence_under_run_three_kernels():
    n = 300
    pool = campaign.Pool(n)
    a, b, c, t1, t2, out = pool.views(n)
    with Ledger("checked") as checked:
        pipeline.run_three_kernels(a, b, c, float(pool.s), t1, t2, out)
    with Ledger("unchecked") as unchecked:
        pipeline.launch_three(a, b, c, pool.s, t1, t2, out)
    assert [x.kernel for x in checked.launches] == [x.kernel for x in unchecked.launches]
    assert np.array_equal(out.copy_to_host(), pool.load_expected(n))


def test_kernel_function_finds_the_python_function():
    assert kernel_function(pipeline.fused_kernel).__name__ == "fused_kernel"
    assert kernel_function(len) is len


# --- occupancy -------------------------------------------------------------------------------------


def test_resident_blocks_per_sm_follows_threads_registers_and_shared_memory():
    assert device.resident_blocks_per_sm(None) == 8  # 2048 threads / 256
    assert device.resident_blocks_per_sm(32) == 8
    assert device.resident_blocks_per_sm(64) == 4  # 65536 / (64 x 256)
    assert device.resident_blocks_per_sm(255) == 1
    assert device.resident_blocks_per_sm(None, 1024) == 2
    assert device.resident_blocks_per_sm(255, 1024) == 0  # one block does not fit
    assert device.resident_blocks_per_sm(None, 32) == 32  # the SM's block slots
    if helpers.is_simulator():
        assert device.resident_blocks_per_sm(None, 256, shared_bytes=48 * 1024) == 4  # 228 KiB / (48 + 1) KiB
    with pytest.raises(ValueError, match="multiple of 32"):
        device.resident_blocks_per_sm(32, block_size=100)


def test_registers_per_thread_is_read_from_the_compiled_kernel():
    if helpers.is_simulator():
        assert device.registers_per_thread(pipeline.fused_kernel) is None
        return
    a = cuda.device_array(8, np.float32)
    registers = device.registers_per_thread(pipeline.fused_kernel, (a, a, a, np.float32(1.0), a))
    assert 0 < registers <= 255 and device.registers_per_thread(pipeline.fused_kernel) >= registers
