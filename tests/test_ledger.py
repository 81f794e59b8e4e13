import json

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers import checks, pipeline
from helpers.counting import CannotAttribute
from helpers.ledger import Ledger, compare, counting_engine
from helpers.lessons.inflight.kernels import copy_kernel
from helpers.sizes import BLOCK_SIZE, blocks_for

N = 300  # not a multiple of the block size: the last block is partly idle


@pytest.fixture
def arrays():
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    t1, t2, out = (checks.poisoned(N) for _ in range(3))
    return a, b, c, t1, t2, out


def test_three_kernels_make_six_trips_and_32_bytes_per_element(arrays):
    a, b, c, t1, t2, out = arrays
    s = np.float32(2.5)
    blocks = blocks_for(N)
    with Ledger("three kernels") as three:
        pipeline.add_kernel[blocks, BLOCK_SIZE](a, b, t1)
        pipeline.multiply_kernel[blocks, BLOCK_SIZE](t1, c, t2)
        pipeline.scale_kernel[blocks, BLOCK_SIZE](t2, s, out)
    assert [launch.kernel for launch in three.launches] == ["add_kernel", "multiply_kernel", "scale_kernel"]
    assert [(launch.reads, launch.writes) for launch in three.launches] == [
        (["a", "b"], ["t1"]),
        (["t1", "c"], ["t2"]),
        (["t2"], ["out"]),
    ]
    assert three.trips == 6
    assert three.bytes_per_element() == 32
    assert three.bytes_read == 20 * N and three.bytes_written == 12 * N
    assert three.round_trips() == ["t1", "t2"]
    assert three.elements == N
    expected = "simulator" if helpers.is_simulator() else "ptx"
    assert three.counted_by() == expected


def test_fused_kernel_makes_two_trips_and_16_bytes_per_element(arrays):
    a, b, c, _, _, out = arrays
    with Ledger("fused") as fused:
        pipeline.fused_kernel[blocks_for(N), BLOCK_SIZE](a, b, c, np.float32(2.5), out)
    assert fused.trips == 2
    assert fused.bytes_per_element() == 16
    assert fused.launches[0].reads == ["a", "b", "c"]
    assert fused.launches[0].writes == ["out"]
    assert fused.round_trips() == []


@pytest.fixture
def wrappers(arrays):
    """The chapter's two pipelines through their wrappers, each counted in its own ledger."""
    a, b, c, t1, t2, out = arrays
    with Ledger("three kernels") as three:
        pipeline.run_three_kernels(a, b, c, 2.5, t1, t2, out)
    with Ledger("fused") as fused:
        pipeline.run_fused(a, b, c, 2.5, out)
    return three, fused


def test_wrappers_are_counted_and_compared(wrappers):
    three, fused = wrappers
    text = compare(three, fused)
    assert "three kernels: 3 launches, 6 trips, 32 bytes per element (20 read + 12 written)" in text
    assert "fused: 1 launch, 2 trips, 16 bytes per element (12 read + 4 written)" in text
    assert text.endswith("bytes per element, three kernels over fused: 2x")


def test_float64_doubles_the_bytes_but_not_the_trips():
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N, dtype=np.float64))
    out = checks.poisoned(N, np.float64)
    with Ledger("fused f64") as fused:
        pipeline.run_fused(a, b, c, 2.5, out)
    assert fused.trips == 2
    assert fused.bytes_per_element() == 32


@cuda.jit
def fill_kernel(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


def test_a_kernel_that_only_writes_makes_one_trip():
    out = checks.poisoned(N)
    with Ledger("fill") as ledger:
        fill_kernel[blocks_for(N), BLOCK_SIZE](out, np.float32(1))
    assert ledger.trips == 1
    assert ledger.launches[0].reads == []
    assert ledger.bytes_per_element() == 4


def test_table_reads_the_same_at_any_size():
    tables = []
    for n in (40, 300):
        a, b, c = (cuda.to_device(x) for x in checks.random_inputs(n))
        out = checks.poisoned(n)
        with Ledger("fused") as fused:
            pipeline.run_fused(a, b, c, 2.0, out)
        tables.append(fused.table())
    assert tables[0] == tables[1]
    assert "a, b, c" in tables[0]


def test_nested_ledgers_both_record_and_hooks_are_removed(arrays):
    a, b, c, t1, t2, out = arrays
    with Ledger("outer") as outer:
        with Ledger("inner") as inner:
            pipeline.run_fused(a, b, c, 2.0, out)
        pipeline.run_fused(a, b, c, 2.0, out)
    assert len(inner.launches) == 1 and len(outer.launches) == 2
    pipeline.run_fused(a, b, c, 2.0, out)  # outside any ledger: not recorded
    assert len(outer.launches) == 2


def test_host_array_is_refused_with_a_clear_message():
    host = np.ones(N, np.float32)
    with pytest.raises(TypeError, match="`host` .*host NumPy array"):
        with Ledger():
            fill_kernel[blocks_for(N), BLOCK_SIZE](host, np.float32(1))
    assert (host == 1).all()  # refused before the kernel ran: the host array is untouched


def test_non_contiguous_array_is_refused():
    strided = checks.poisoned(2 * N)[::2]
    with pytest.raises(ValueError, match="`strided` .*not contiguous"):
        with Ledger():
            fill_kernel[blocks_for(N), BLOCK_SIZE](strided, np.float32(1))


def test_empty_array_is_refused():
    empty = cuda.device_array(0, np.float32)
    with pytest.raises(ValueError, match="`empty` .*n = 0"):
        with Ledger():
            fill_kernel[1, BLOCK_SIZE](empty, np.float32(1))


def test_empty_ledger_has_no_bytes_per_element():
    with pytest.raises(ValueError, match="recorded no launches"):
        Ledger("nothing").bytes_per_element()


@cuda.jit
def gather_kernel(x, idx, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[idx[i]]


def test_a_launch_the_compiled_code_cannot_count_runs_but_never_gets_a_guessed_count():
    from helpers.counting.ptx import CannotAttribute

    x = cuda.to_device(checks.random_inputs(N, count=1)[0])
    idx_host = np.random.default_rng().permutation(N).astype(np.int64)
    idx = cuda.to_device(idx_host)
    out = checks.poisoned(N)
    with Ledger("gather") as ledger:
        gather_kernel[blocks_for(N), BLOCK_SIZE](x, idx, out)
    checks.check_close(out, x.copy_to_host()[idx_host])  # the kernel ran either way
    if helpers.is_simulator():
        assert ledger.trips == 2 and ledger.bytes_per_element() == 16  # x[idx[i]]: 4 + idx: 8, out: 4
    else:
        assert "loaded from memory" in ledger.launches[0].uncounted
        with pytest.raises(CannotAttribute, match="gather_kernel"):
            ledger.require_counted()
        with pytest.raises(CannotAttribute):
            ledger.show()


def test_a_none_argument_is_named_before_the_kernel_runs():
    out = checks.poisoned(N)
    with pytest.raises(TypeError, match=r"`value` \(argument of fill_kernel\) is None"):
        with Ledger():
            value = None
            fill_kernel[blocks_for(N), BLOCK_SIZE](out, value)
    assert np.isnan(out.copy_to_host()).all()


@pytest.mark.parametrize("engine", ["dynamic", "static"])
def test_both_engines_record_the_same_launches(engine, arrays):
    a, b, c, t1, t2, out = arrays
    with counting_engine(engine), Ledger(engine) as counted:
        pipeline.run_three_kernels(a, b, c, 2.0, t1, t2, out)
    assert {launch.counted_by for launch in counted.launches} == {"ptx" if engine == "static" else "simulator"}
    assert counted.trips == 6 and counted.bytes_per_element() == 32


def test_mismatched_lengths_are_counted_by_each_arrays_own_elements():
    long_a = cuda.to_device(np.ones(3 * N, np.float32))
    b, c = (cuda.to_device(np.ones(N, np.float32)) for _ in range(2))
    out = checks.poisoned(N)
    per_engine = {}
    for engine in ("dynamic", "static"):
        with counting_engine(engine), Ledger(engine) as counted:
            pipeline.fused_kernel[blocks_for(N), BLOCK_SIZE](long_a, b, c, np.float32(2), out)
        per_engine[engine] = {t.name: (t.bytes_read, t.bytes_written) for t in counted.launches[0].arrays}
    assert per_engine["static"] == per_engine["dynamic"]
    assert per_engine["static"]["long_a"] == (4 * N, 0)  # the N elements read, not 3 N


def test_counting_engine_names_its_choices():
    with pytest.raises(ValueError, match="auto, static, dynamic"):
        with counting_engine("ptx"):
            pass


def test_an_argument_record_reads_foreign_arrays_through_their_cuda_array_interface():
    from helpers.counting import ArgInfo

    class Foreign:  # a torch-like tensor: its dtype is not a NumPy dtype
        shape = (4, 3)
        dtype = "torch.float32"
        __cuda_array_interface__ = {"shape": (4, 3), "typestr": "<f4", "strides": None, "data": (0, False),
                                    "version": 3}

    info = ArgInfo.of("t", Foreign())
    assert (info.is_array, info.dtype, info.shape, info.itemsize, info.strides) == (True, "float32", (4, 3), 4, (12, 4))
    with pytest.raises(TypeError, match="`n` is None"):
        ArgInfo.of("n", None)


def test_a_failure_inside_the_static_counter_is_a_named_refusal_not_a_crash(monkeypatch):
    """The learner's launch runs on, and asking for its count says the counter failed, and how."""
    from helpers import ledger as ledger_module

    def broken(*args, **kwargs):
        raise TypeError("unsupported operand")

    monkeypatch.setattr(ledger_module, "static_traffic", broken)
    a, b = (cuda.to_device(x) for x in checks.random_inputs(N, count=2))
    out = checks.poisoned(N)
    with counting_engine("static"), Ledger("broken counter") as ledger:
        pipeline.add_kernel[blocks_for(N), BLOCK_SIZE](a, b, out)
    checks.check_close(out.copy_to_host(), a.copy_to_host() + b.copy_to_host())
    with pytest.raises(CannotAttribute, match=r"static counter failed while following add_kernel's compiled code "
                                              r"\(TypeError: unsupported operand\)"):
        ledger.trips


def test_a_ledger_entered_twice_is_refused_and_records_each_launch_once(arrays):
    a, b, c, _, _, out = arrays
    ledger = Ledger("once")
    with ledger:
        with pytest.raises(RuntimeError, match="'once' is already recording: entering it again would record"):
            with ledger:
                pass
        pipeline.run_fused(a, b, c, 2.0, out)
    assert len(ledger.launches) == 1 and ledger.trips == 2
    with ledger:  # entered again after it closed: it goes on recording
        pipeline.run_fused(a, b, c, 2.0, out)
    assert len(ledger.launches) == 2


def test_nested_ledgers_that_compare_equal_each_keep_recording(arrays):
    """Two ledgers with one name that recorded the same launches are equal as data, not the same ledger."""
    a, b, c, _, _, out = arrays
    with Ledger() as outer:
        with Ledger() as inner:
            pipeline.run_fused(a, b, c, 2.0, out)
        assert inner == outer and inner is not outer
        pipeline.run_fused(a, b, c, 2.0, out)
    pipeline.run_fused(a, b, c, 2.0, out)  # outside both: not recorded
    assert (len(inner.launches), len(outer.launches)) == (1, 2)


@pytest.mark.parametrize("engine", [
    "dynamic",  # on a GPU: the simulator subprocess raises it
    pytest.param("static", marks=pytest.mark.skipif(not helpers.is_simulator(), reason="on a GPU nothing stops the "
                                                    "thread; the static count refuses (OutOfBounds) instead")),
])
def test_an_index_past_the_end_names_the_array_and_the_fix(engine):
    x, out = cuda.to_device(np.ones(100, np.float32)), checks.poisoned(300)
    with pytest.raises(IndexError, match=r"index \d+ is out of bounds for axis 0 with size 100: a thread indexed past "
                                         r"the end of `x` \(100 elements\); add a bounds guard, such as "
                                         r"`if i < x.size:`"):
        with counting_engine(engine), Ledger("copy"):
            copy_kernel[2, 256](x, out)


def test_a_2d_index_past_the_end_names_the_array_and_each_bound():
    a, out = cuda.to_device(np.ones((3, 4), np.float32)), checks.poisoned(16)
    with pytest.raises(IndexError, match=r"past the end of `a` \(shape \(3, 4\)\); add a bounds guard, such as "
                                         r"`if i < a.shape\[0\] and j < a.shape\[1\]:`"):
        with counting_engine("dynamic"), Ledger("rows"):
            two_d_copy[1, (4, 4)](a, out)


@cuda.jit
def two_d_copy(a, out):
    i, j = cuda.grid(2)
    if i * 4 + j < out.size:
        out[i * 4 + j] = a[i, j]


# --- a ledger that travels, and its totals ---------------------------------------------------


def _through_json(ledger):
    return Ledger.from_json(json.loads(json.dumps(ledger.to_json())))


def test_a_ledger_comes_back_from_json_as_it_was(arrays, wrappers):
    a, b, _, _, _, out = arrays
    three, _ = wrappers
    back = _through_json(three)
    assert back == three and back.table() == three.table() and back.summary() == three.summary()
    host = np.ones(N, np.float32)
    with Ledger("host", allow_host_arrays=True) as copied:
        pipeline.fused_kernel[blocks_for(N), BLOCK_SIZE](a, host, cuda.In(host.copy()), np.float32(2), out)
    back = _through_json(copied)
    assert back == copied and back.allow_host_arrays and back.host_trips == copied.host_trips == 2


def test_a_refusal_comes_back_from_json_as_the_same_kind():
    x, out = cuda.to_device(np.ones(N, np.float32)), checks.poisoned(N)
    idx = cuda.to_device(np.arange(N, dtype=np.int64))
    with counting_engine("static"), Ledger("gather") as ledger:
        gather_kernel[blocks_for(N), BLOCK_SIZE](x, idx, out)
    kind = type(ledger.launches[0].refusal)
    back = _through_json(ledger)
    assert issubclass(kind, CannotAttribute) and type(back.launches[0].refusal) is kind
    with pytest.raises(kind, match="gather_kernel: .*loaded from memory"):
        back.require_counted()


def test_a_function_counted_in_a_simulator_subprocess_gives_the_ledgers_counted_here():
    """What a GPU process does (Ledger.counted_in_simulator on a GPU), taken here from the simulator."""
    from helpers import ledger as ledger_module
    from helpers.lessons.softmax import kernels as softmax

    there = ledger_module._counted_in_subprocess(softmax.count_ledgers, {"rows": 4, "cols": 37})
    here = Ledger.counted_in_simulator(softmax.count_ledgers, rows=4, cols=37)
    assert [ledger.name for ledger in there] == ["unfused", "row in registers", "online"]
    assert [ledger.table() for ledger in there] == [ledger.table() for ledger in here]
    assert {ledger.counted_by() for ledger in there} == {"simulator"}


def test_only_a_helpers_function_is_counted_in_the_subprocess():
    from helpers import ledger as ledger_module

    with pytest.raises(ValueError, match="counts functions of helpers modules, got 'os:getcwd'"):
        ledger_module.counted_request({"function": "os:getcwd", "kwargs": {}})


def test_the_totals_a_record_keeps(wrappers):
    from helpers.ledger import Totals

    three, fused = wrappers
    method = "simulator" if helpers.is_simulator() else "ptx"
    assert three.totals() == Totals(3, 6, 32.0, 24.0, ["t1", "t2"], method)  # six float32 arrays: 24 B per element
    assert fused.totals() == Totals(1, 2, 16.0, 16.0, [], method)
    assert three.bytes_by_array() == {"a": 4 * N, "b": 4 * N, "t1": 8 * N, "c": 4 * N, "t2": 8 * N, "out": 4 * N}
    with pytest.raises(ValueError, match="recorded no launches"):
        Ledger("nothing").totals()
