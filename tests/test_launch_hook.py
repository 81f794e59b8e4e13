"""The one launch hook (helpers.launch_hook): every watcher of Numba's launches subscribes to it.

Each subscriber sees each launch once, the latest first; the launch runs once however many
watch; the arguments are read once per launch and named as the launching code names them;
Numba is restored when the last subscriber leaves.  The ledger, the graph checks and the
grader's launch watch all subscribe, and can watch the same launches together.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers import checks, launch_hook, pipeline
from helpers.classroom.watch import Launches
from helpers.ledger import Ledger
from helpers.lessons.launches import graphs
from helpers.sizes import BLOCK_SIZE, blocks_for

N = 300  # not a multiple of the block size


@cuda.jit(device=True)
def _one_more(x):
    return x + 1


@cuda.jit
def increment_kernel(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _one_more(out[i])  # a device function: part of the kernel, not a launch


def _patched_entry():
    """What Numba's launch path is now (the simulator's kernel call, or the GPU's dispatcher call)."""
    if helpers.is_simulator():
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        return FakeCUDAKernel.__call__
    from numba.cuda.dispatcher import CUDADispatcher

    return CUDADispatcher.call


def _noting(seen: list, label: str):
    def subscriber(call, proceed):
        seen.append((label, call.name, call.names, call.grid, call.block))
        return proceed()

    return subscriber


def test_one_subscriber_sees_each_launch_once_with_its_names_and_shape():
    out = cuda.to_device(np.zeros(N, np.float32))
    seen: list = []
    with launch_hook.on_launch(_noting(seen, "only")):
        increment_kernel[blocks_for(N), BLOCK_SIZE](out)
        increment_kernel[blocks_for(N), BLOCK_SIZE](out)
    assert seen == [("only", "increment_kernel", ["out"], (blocks_for(N),), (BLOCK_SIZE,))] * 2
    assert (out.copy_to_host() == 2).all()


def test_two_subscribers_both_see_the_launch_the_latest_first_and_it_runs_once():
    out = cuda.to_device(np.zeros(N, np.float32))
    seen: list = []
    entry = _patched_entry()
    with launch_hook.on_launch(_noting(seen, "first")):
        with launch_hook.on_launch(_noting(seen, "second")):
            increment_kernel[blocks_for(N), BLOCK_SIZE](out)
        increment_kernel[blocks_for(N), BLOCK_SIZE](out)
        assert _patched_entry() is not entry
    assert [label for label, *_ in seen] == ["second", "first", "first"]
    assert (out.copy_to_host() == 2).all()  # two launches, each run once
    assert not launch_hook.watching() and _patched_entry() is entry  # Numba as it was before


def test_a_subscriber_that_does_not_proceed_stops_the_launch():
    out = cuda.to_device(np.zeros(N, np.float32))
    with launch_hook.on_launch(lambda call, proceed: None):
        increment_kernel[blocks_for(N), BLOCK_SIZE](out)
    assert (out.copy_to_host() == 0).all()


def test_a_subscriber_may_change_what_is_launched():
    out, other = (cuda.to_device(np.zeros(N, np.float32)) for _ in range(2))

    def redirect(call, proceed):
        call.args = [other]
        return proceed()

    with launch_hook.on_launch(redirect):
        increment_kernel[blocks_for(N), BLOCK_SIZE](out)
    assert (out.copy_to_host() == 0).all() and (other.copy_to_host() == 1).all()


def _launch_on_behalf(kernel, *args):
    """A function that only passes a launch on: it names none of the arrays."""
    kernel[blocks_for(N), BLOCK_SIZE](*args)


def test_a_function_that_passes_a_launch_on_leaves_the_naming_to_its_caller():
    a, b = (cuda.to_device(x) for x in checks.random_inputs(N, count=2))
    t1 = checks.poisoned(N)
    with Ledger("passed on") as ledger:
        _launch_on_behalf(pipeline.add_kernel, a, b, t1)
        pipeline.add_kernel[blocks_for(N), BLOCK_SIZE](a, b, cuda.device_array(N, np.float32))
    assert [(launch.reads, launch.writes) for launch in ledger.launches] == [(["a", "b"], ["t1"]), (["a", "b"], ["arg2"])]
    assert "lessons" not in inspect.getsource(launch_hook)  # the naming knows no lesson's module


def test_the_ledger_the_graph_check_and_the_grader_watch_one_launch_together():
    """Once the graph check patched Numba apart from the ledger; now all three subscribe."""
    a, b, c, t1, t2, out = (cuda.to_device(x) for x in checks.random_inputs(N, count=6))
    stream = graphs.SimulatedStream() if helpers.is_simulator() else cuda.default_stream()
    expected = stream if helpers.is_simulator() else None
    with Ledger("three") as ledger, Launches() as launches, graphs._Watch(expected, run=True) as watch:
        pipeline.add_kernel[blocks_for(N), BLOCK_SIZE, stream](a, b, t1)
        pipeline.multiply_kernel[blocks_for(N), BLOCK_SIZE, stream](t1, c, t2)
    assert [launch.kernel for launch in watch.launches] == ["add_kernel", "multiply_kernel"]
    assert [launch.name for launch in launches.launched] == ["add_kernel", "multiply_kernel"]
    assert [(launch.reads, launch.writes) for launch in ledger.launches] == [(["a", "b"], ["t1"]), (["t1", "c"], ["t2"])]
    checks.check_close(t2, (a.copy_to_host() + b.copy_to_host()) * c.copy_to_host())


def test_nested_ledgers_share_one_count_and_one_subscription():
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    out = checks.poisoned(N)
    seen: list = []
    with launch_hook.on_launch(_noting(seen, "watch")), Ledger("outer") as outer, Ledger("inner") as inner:
        pipeline.run_fused(a, b, c, 2.0, out)
        assert len(launch_hook._subscribers) == 2  # the watch and the ledgers' one
    assert len(seen) == 1 and outer.launches == inner.launches and outer.launches[0] is inner.launches[0]
    assert not launch_hook.watching()


def test_a_ledger_entered_twice_is_refused_and_the_hook_stays_as_it_was():
    ledger = Ledger("once")
    with ledger:
        with pytest.raises(RuntimeError, match="already recording"):
            with ledger:
                pass
        assert len(launch_hook._subscribers) == 1
    assert not launch_hook.watching()


def test_each_argument_is_read_once_per_launch_however_many_watch(monkeypatch):
    reads: list = []
    real = launch_hook.host_copy

    def counting(value):
        reads.append(value)
        return real(value)

    monkeypatch.setattr(launch_hook, "host_copy", counting)
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    out, host = checks.poisoned(N), np.ones(N, np.float32)
    args = (a, b, cuda.In(host), np.float32(2), out)
    stream = graphs.SimulatedStream() if helpers.is_simulator() else cuda.default_stream()
    with Ledger("all", allow_host_arrays=True), Launches(), launch_hook.on_launch(_noting([], "x")):
        pipeline.fused_kernel[blocks_for(N), BLOCK_SIZE, stream](*args)
    assert len(reads) == len(args)


class _Config:
    def __init__(self, grid, block, stream):
        self.griddim, self.blockdim, self.stream = grid, block, stream


def stand_in_kernel():
    pass


class _StandInDispatcher:
    """Numba's CUDADispatcher as the hook sees it: ``call(args, launch_config)``, which may pass the
    launch on to a specialised dispatcher by calling ``call`` again (as numba-cuda does)."""

    launched: list = []

    def __init__(self, specialised=None):
        self.specialised = specialised

    py_func = staticmethod(stand_in_kernel)

    def call(self, args, launch_config):
        if self.specialised is not None:
            return self.specialised.call(args, launch_config)
        _StandInDispatcher.launched.append((args, launch_config.stream))
        return "launched"


def test_the_gpu_entry_sees_a_launch_once_even_when_numba_passes_it_on(monkeypatch):
    """What only a GPU runs (the patch of CUDADispatcher.call), taken here on a stand-in dispatcher."""
    import numba.cuda.dispatcher

    monkeypatch.setattr(numba.cuda.dispatcher, "CUDADispatcher", _StandInDispatcher)
    monkeypatch.setattr(launch_hook, "is_simulator", lambda: False)
    _StandInDispatcher.launched = []
    original = _StandInDispatcher.call
    seen = []

    def moving(call, proceed):
        seen.append((call.name, call.given, call.grid, call.block, call.stream))
        call.config = _Config(call.config.griddim, call.config.blockdim, "the capture's stream")
        return proceed()

    x = np.ones(3, np.float32)
    with launch_hook.on_launch(moving):
        done = _StandInDispatcher(specialised=_StandInDispatcher()).call([x, 2], _Config((4, 1, 1), (256, 1, 1), 0))
    assert done == "launched"
    assert seen == [("stand_in_kernel", (x, 2), (4,), (256,), 0)]
    assert _StandInDispatcher.launched == [((x, 2), "the capture's stream")]
    assert _StandInDispatcher.call is original
