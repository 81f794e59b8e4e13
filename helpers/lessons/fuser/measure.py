"""Notebook 06's comparison: the tiny fuser's kernel, the hand-written fused kernel and torch.compile.

Each is checked against NumPy, then timed two ways, like against like: GPU time (CUDA events, the
launch queued behind a hold kernel, :func:`helpers.timing.time_gpu`) and host time per call
(:func:`helpers.timing.host_enqueue_us`).
"""

from __future__ import annotations

import argparse

import numpy as np

from helpers.backend import is_simulator
from helpers.device import banner
from helpers.harness.campaign import Builder, Case, Pool, on_device, run_cases
from helpers.harness.cli import Command
from helpers.harness.peers import numba_fused, prepare, torch_compiled
from helpers.lessons.fuser.fuser import fuse
from helpers.lessons.fuser.record import Contender, FuserRow, FuserVsCompile
from helpers.lessons.fuser.report import summary
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import host_enqueue_samples_us, time_gpu

SIZES = (2**20, 2**24, 2**28)
S = 1.5
HOST_SAMPLES = 51  # host time per call: enough calls for a median and an interquartile range


def fuser_peer(pool: Pool) -> Builder:
    """The tiny fuser's kernel of the expression, launched through its checks."""
    fused = fuse(lambda a, b, c, s: (a + b) * c / s, scalars=("s",))
    return numba_fused(pool, lambda a, b, c, s, out: fused[blocks_for(out.size), BLOCK_SIZE](a, b, c, s, out))


PEERS = {"fuser": fuser_peer, "hand-written": numba_fused,
         "torch.compile": lambda pool: torch_compiled(pool, dynamic=False)}


def measure(sizes: tuple[int, ...] = SIZES) -> FuserVsCompile:
    """Check, then time, the three implementations at each size (GPU only)."""
    pool = Pool(max(sizes), s=S)
    prepared = prepare(PEERS, pool)  # torch missing or broken: the Numba kernels are still measured
    record = FuserVsCompile(expression="(a + b) * c / s")
    contenders: dict[str, Contender] = {}
    results: dict[str, np.ndarray] = {}

    def timed(label: str, n: int, case: Case) -> None:
        got, expected = on_device(case.output()).copy_to_host(), pool.expected[:n].copy_to_host()
        timing = time_gpu(case.run, label=label, repeats=50)
        assert timing is not None
        results[label] = got
        q1, host_us, q3 = np.percentile(host_enqueue_samples_us(case.run, HOST_SAMPLES), [25, 50, 75])
        contenders[label] = Contender(equals_numpy=bool(np.array_equal(got, expected)), gpu_ms=timing.median_ms,
                                      host_us=float(host_us), max_abs_diff=float(np.max(np.abs(got - expected))),
                                      host_iqr_us=float(q3 - q1))

    def row_done(n: int) -> None:
        same = "fuser" in results and "hand-written" in results and np.array_equal(results["fuser"],
                                                                                     results["hand-written"])
        record.rows.append(FuserRow(n=n, bytes_moved=16 * n, contenders=dict(contenders),
                                    fuser_equals_hand_written=bool(same)))
        contenders.clear()
        results.clear()

    run_cases(prepared.builders, sizes, pool=pool, report=lambda check: None, time=timed, checkpoint=row_done)
    return record


def _run(args: argparse.Namespace) -> FuserVsCompile | int:
    print(banner())
    if is_simulator():
        print("no GPU: nothing to time; notebook 06 reads the committed result")
        return 0
    record = measure()
    print(summary(record))
    return record


COMMANDS = [Command("", "the tiny fuser, the hand-written fused kernel and torch.compile", _run)]
