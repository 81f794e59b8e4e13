"""The tiny fuser: its kernels against hand-written ones (bit for bit), its source, its errors."""

import inspect
import math

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers import checks, pipeline, results
from helpers.harness.cli import main_of
from helpers.ledger import Ledger
from helpers.lessons.fuser.fuser import FuseError, compile_source, fuse, generate_source, scalar_names
from helpers.lessons.fuser import measure as versus
from helpers.lessons.fuser.measure import COMMANDS
from helpers.lessons.fuser.record import Contender, FuserRow, FuserVsCompile
from helpers.lessons.fuser.report import summary
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import Timing

N = 300  # not a multiple of the block size


@cuda.jit
def hand_multiply_subtract(a, b, c, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] * b[i] - c[i]


@cuda.jit
def hand_relative_gap(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (a[i] - b[i]) / (a[i] + b[i])


@cuda.jit
def hand_negate_scale_add(a, b, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = -(a[i] * s) + b[i]


S = np.float32(1.7)

CASES = [
    # (expression, scalars, hand-written kernel, its arguments before out, NumPy)
    (lambda a, b, c, s: (a + b) * c / s, ("s",), pipeline.fused_kernel, "abcs", lambda a, b, c: (a + b) * c / S),
    (lambda a, b, c: a * b - c, (), hand_multiply_subtract, "abc", lambda a, b, c: a * b - c),
    (lambda a, b: (a - b) / (a + b), (), hand_relative_gap, "ab", lambda a, b, c: (a - b) / (a + b)),
    (lambda a, b, s: -(a * s) + b, ("s",), hand_negate_scale_add, "abs", lambda a, b, c: -(a * S) + b),
]


@pytest.mark.parametrize("expression, scalars, hand, params, numpy_fn", CASES, ids=["chapter", "mul-sub", "gap", "neg"])
def test_fused_kernel_is_bitwise_identical_to_the_hand_written_one(expression, scalars, hand, params, numpy_fn):
    host = dict(zip("abc", checks.random_inputs(N, seed=7)))
    device = {name: cuda.to_device(x) for name, x in host.items()}
    device["s"] = S
    args = [device[p] for p in params]
    kernel = fuse(expression, scalars=scalars)
    out_fuser, out_hand = checks.poisoned(N), checks.poisoned(N)
    kernel[blocks_for(N), BLOCK_SIZE](*args, out_fuser)
    hand[blocks_for(N), BLOCK_SIZE](*args, out_hand)
    checks.check_close(out_fuser, numpy_fn(host["a"], host["b"], host["c"]))
    assert np.array_equal(out_fuser.copy_to_host(), out_hand.copy_to_host())


@pytest.fixture(scope="module")
def chapter_kernel():
    """The chapter's expression, (a + b) * c / s, fused with s a scalar."""
    return fuse(lambda a, b, c, s: (a + b) * c / s, scalars=("s",))


def test_fused_kernel_makes_two_trips(chapter_kernel):
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    out = checks.poisoned(N)
    with Ledger("fuser") as ledger:
        chapter_kernel[blocks_for(N), BLOCK_SIZE](a, b, c, S, out)
    assert len(ledger.launches) == 1
    assert ledger.trips == 2
    assert ledger.bytes_per_element() == 16
    assert ledger.launches[0].reads == ["a", "b", "c"] and ledger.launches[0].writes == ["out"]


def test_generated_source_of_the_chapter_expression():
    source = generate_source(lambda a, b, c, s: (a + b) * c / s, scalars=("s",))
    assert source == (
        "def fused(a, b, c, s, out):\n"
        "    i = cuda.grid(1)\n"
        "    if i < out.size:\n"
        "        a_i = a[i]\n"
        "        b_i = b[i]\n"
        "        c_i = c[i]\n"
        "        t1 = a_i + b_i\n"
        "        t2 = t1 * c_i\n"
        "        t3 = t2 / s\n"
        "        out[i] = t3\n"
    )


def test_shared_subexpressions_are_computed_once_and_unused_inputs_not_loaded():
    source = generate_source(lambda a, b, c: (a + b) * (a + b), name="square_of_sum")
    assert source.startswith("def square_of_sum(a, b, c, out):")
    assert source.count("a_i + b_i") == 1
    assert "t2 = t1 * t1" in source
    assert "c[i]" not in source  # c is a parameter but never read: no load, no trip


def test_kernel_source_is_attached_and_readable_by_inspect():
    kernel = fuse(lambda x, y: x * y, name="product")
    assert kernel.source == generate_source(lambda x, y: x * y, name="product")
    assert inspect.getsource(kernel.py_func) == kernel.source


def test_reflected_operations_keep_operand_order():
    source = generate_source(lambda x, k: k - x, scalars=("k",))
    assert "t1 = k - x_i" in source


@pytest.mark.parametrize(
    "expression, message",
    [
        (lambda a: a ** 2, r"`\*\*` is not supported"),
        (lambda a: a * 2.0, r"constant 2.0 .*scalar parameters"),
        (lambda a: 1 - a, r"constant 1 "),
        (lambda a: a / max(a), r"reduction"),
        (lambda a: sum(a), r"reduction"),
        (lambda a, b: a < b, r"comparison"),
        (lambda a, b: a == b, r"comparison"),
        (lambda a: math.exp(a), r"`math` function"),
        (lambda a: np.exp(a), r"NumPy function np.exp"),
        (lambda a: a if a else -a, r"branching"),
        (lambda a: abs(a), r"abs\(\)"),
        (lambda a: a[0], r"indexing"),
        (lambda a, b: (a + b, a - b), r"one expression .*got tuple"),
        (lambda a: 3, r"one expression .*got int"),
    ],
)
def test_unsupported_operations_raise_a_clear_error(expression, message):
    with pytest.raises(FuseError, match=message):
        generate_source(expression)


def test_bad_parameters_raise_a_clear_error():
    with pytest.raises(FuseError, match="reserved"):
        generate_source(lambda a, out: a + out)
    with pytest.raises(FuseError, match="reserved"):
        generate_source(lambda a, t1: a + t1)
    with pytest.raises(FuseError, match="clashes"):
        generate_source(lambda a, a_i: a + a_i)
    with pytest.raises(FuseError, match="positional"):
        generate_source(lambda *arrays: arrays[0])
    with pytest.raises(FuseError, match="no parameters"):
        generate_source(lambda: 1)
    with pytest.raises(FuseError, match=r"\['k'\] are not parameters"):
        generate_source(lambda a, b: a + b, scalars=("k",))
    with pytest.raises(FuseError, match="reads no array"):
        generate_source(lambda s, k: s * k, scalars=("s", "k"))
    with pytest.raises(FuseError, match="not a Python identifier"):
        generate_source(lambda a, b: a + b, name="my kernel")
    with pytest.raises(FuseError, match="needs a function"):
        generate_source("a + b")


def test_compile_source_runs_generated_code():
    kernel = compile_source(generate_source(lambda x, y: x - y, name="difference"), name="difference")
    x, y = checks.random_inputs(N, count=2)
    out = checks.poisoned(N)
    kernel[blocks_for(N), BLOCK_SIZE](cuda.to_device(x), cuda.to_device(y), out)
    assert np.array_equal(out.copy_to_host(), x - y)


# --- bad input to a fused kernel or to fuse() itself ----------------------------------------


def test_fused_kernel_refuses_host_arrays(chapter_kernel):
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    with pytest.raises(TypeError, match=r"`b` is a host NumPy array.*cuda.to_device\(b\)"):
        chapter_kernel[blocks_for(N), BLOCK_SIZE](a, np.ones(N, np.float32), c, S, checks.poisoned(N))


def test_fused_kernel_refuses_mixed_and_integer_dtypes(chapter_kernel):
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    c64 = cuda.to_device(np.ones(N, np.float64))
    with pytest.raises(TypeError, match="c: float64"):
        chapter_kernel[blocks_for(N), BLOCK_SIZE](a, b, c64, S, checks.poisoned(N))
    ints = [cuda.to_device(np.arange(N, dtype=np.int32)) for _ in range(4)]
    with pytest.raises(TypeError, match="`a` is int32"):
        chapter_kernel[blocks_for(N), BLOCK_SIZE](*ints[:3], S, ints[3])


def test_fused_kernel_refuses_bad_lengths_scalars_and_argument_counts(chapter_kernel):
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    launch = chapter_kernel[blocks_for(N), BLOCK_SIZE]
    with pytest.raises(ValueError, match="different lengths"):  # the guard reads out.size: a shorter `a` would be read past its end
        launch(a[:N - 1], b, c, S, checks.poisoned(N))
    with pytest.raises(TypeError, match="`s` must be a number .*got None"):
        launch(a, b, c, None, checks.poisoned(N))
    with pytest.raises(TypeError, match="`s` must be a number .*got DeviceNDArray|`s` must be a number .*got FakeCUDAArray"):
        launch(a, b, c, c, checks.poisoned(N))
    with pytest.raises(TypeError, match=r"takes 5 arguments \(a, b, c, s, out\), got 4"):
        launch(a, b, c, checks.poisoned(N))


def test_fused_kernel_output_may_be_an_input_exactly_but_not_overlap_one():
    scale = fuse(lambda x, k: x * k, scalars="k")
    host = checks.random_inputs(N, count=1)[0]
    x = cuda.to_device(host)
    scale[blocks_for(N), BLOCK_SIZE](x, 2, x)  # in place, elementwise: safe, and the int 2 becomes float32
    assert np.array_equal(x.copy_to_host(), host * np.float32(2))
    whole = cuda.to_device(np.ones(N + 1, np.float32))
    with pytest.raises(ValueError, match="`out` overlaps `x`"):
        scale[blocks_for(N), BLOCK_SIZE](whole[:N], 2, whole[1:])


def test_scalars_are_passed_in_the_arrays_dtype():
    # s as a Python float (float64) would make the kernel compute in float64: not the hand-written kernel's bits
    host = dict(zip("abc", checks.random_inputs(N, seed=3)))
    a, b, c = (cuda.to_device(host[k]) for k in "abc")
    kernel = fuse(lambda a, b, c, s: (a + b) * c / s, scalars="s")
    out_fuser, out_hand = checks.poisoned(N), checks.poisoned(N)
    kernel[blocks_for(N), BLOCK_SIZE](a, b, c, 1.7, out_fuser)
    pipeline.run_fused(a, b, c, 1.7, out_hand)
    assert np.array_equal(out_fuser.copy_to_host(), out_hand.copy_to_host())


def test_the_ledger_names_the_arguments_as_the_caller_does(chapter_kernel):
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    result = checks.poisoned(N)
    with Ledger("fuser") as ledger:
        chapter_kernel[blocks_for(N), BLOCK_SIZE](c, a, b, S, result)
    assert ledger.launches[0].reads == ["c", "a", "b"] and ledger.launches[0].writes == ["result"]


@pytest.mark.parametrize("scalars, expected", [
    ("k1", ["k1"]),
    ("s, k1", ["s", "k1"]),
    ("s k1", ["s", "k1"]),
    (("k1",), ["k1"]),
    (["s", "k1"], ["s", "k1"]),
    ((), []),
])
def test_scalars_are_names_never_letters(scalars, expected):
    assert scalar_names(scalars) == expected


def test_one_string_of_scalars_names_the_parameter():
    source = generate_source(lambda x, k1: x * k1, scalars="k1")
    assert "k1_i" not in source and "t1 = x_i * k1" in source


@pytest.mark.parametrize("scalars, message", [
    (5, "tuple of parameter names"),
    ((1,), "1 is not a name"),
    (("k-1",), "'k-1' is not a name"),
])
def test_bad_scalars_are_named(scalars, message):
    with pytest.raises(FuseError, match=message):
        fuse(lambda x, k: x * k, scalars=scalars)


@pytest.mark.parametrize("name, message", [
    ("cuda", "kernel name 'cuda' is taken: the generated kernel calls `cuda.grid`"),
    ("class", "not a Python identifier"),
    (3, "not a Python identifier"),
])
def test_kernel_names_that_cannot_work_are_refused(name, message):
    with pytest.raises(FuseError, match=message):
        fuse(lambda x, y: x + y, name=name)


def test_fused_kernel_still_exposes_the_jit_kernel():
    kernel = fuse(lambda x, y: x + y, name="plus")
    assert kernel.name == "plus" and kernel.parameters == ["x", "y"]
    assert "plus(x, y, out)" in repr(kernel)
    assert inspect.getsource(kernel.py_func) == kernel.source


@pytest.mark.parametrize("s, message", [
    (0, "`s` is 0: dividing by it makes every result infinite"),
    (-0.0, "`s` is 0: dividing by it"),
    (1e-46, "`s` is 1e-46, closer to 0 than the smallest float32 .*becomes 0"),
    (1e39, "`s` is 1e\\+39, beyond the largest float32 .*becomes inf"),
])
def test_a_scalar_the_expression_divides_by_follows_run_fused_rules(chapter_kernel, s, message):
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    out = checks.poisoned(N)
    with pytest.raises(ValueError, match=message):
        chapter_kernel[blocks_for(N), BLOCK_SIZE](a, b, c, s, out)
    with pytest.raises(ValueError, match=message):
        pipeline.run_fused(a, b, c, s, out)  # the same rule, the same words
    assert np.isnan(out.copy_to_host()).all()  # nothing was launched


def test_only_the_scalars_it_divides_by_must_be_non_zero():
    assert fuse(lambda a, b, c, s: (a + b) * c / s, scalars="s").nonzero == {"s"}
    assert fuse(lambda a, s: a / -s, scalars="s").nonzero == {"s"}
    assert fuse(lambda a, k, s: s / a * k, scalars="k, s").nonzero == set()
    scale = fuse(lambda x, k: x * k, scalars="k")
    x = cuda.to_device(checks.random_inputs(N, count=1)[0])
    out = checks.poisoned(N)
    scale[blocks_for(N), BLOCK_SIZE](x, 0, out)  # multiplying by 0 is a fine answer
    assert not out.copy_to_host().any()
    with pytest.raises(ValueError, match="`k` is 1e\\+39, beyond the largest float32"):
        scale[blocks_for(N), BLOCK_SIZE](x, 1e39, out)  # but no scalar may become inf in the arrays' dtype


@pytest.mark.parametrize("config, short", [
    ((1, 256), 44),
    ((2, 128), 44),
    (((1,), (256,)), 44),
    (((1, 4), 256), 44),  # blocks along y start the same elements again: only x counts for cuda.grid(1)
])
def test_a_launch_too_small_for_n_is_refused_before_it_runs(chapter_kernel, config, short):
    a, b, c = (cuda.to_device(x) for x in checks.random_inputs(N))
    out = checks.poisoned(N)
    with pytest.raises(ValueError, match=f"arrays hold n = {N}: {short} elements would never be written.*blocks_for"):
        chapter_kernel[config](a, b, c, S, out)
    assert np.isnan(out.copy_to_host()).all()
    chapter_kernel[blocks_for(N, 128), 128](a, b, c, S, out)  # enough threads, and more than enough: fine
    chapter_kernel[blocks_for(N) + 3, BLOCK_SIZE](a, b, c, S, out)
    checks.check_close(out, pipeline.reference(*(x.copy_to_host() for x in (a, b, c)), S))


# --- notebook 06's comparison: the fuser, the hand-written kernel and torch.compile ---------------


def test_the_comparison_reads_back_and_prints_a_line_per_size_and_implementation(tmp_path):
    record = FuserVsCompile(expression="(a + b) * c / s", rows=[FuserRow(
        n=2**20, bytes_moved=16 * 2**20, fuser_equals_hand_written=True,
        contenders={"fuser": Contender(True, 0.0062, 85.2), "torch.compile": Contender(False, 0.0048, 65.3, 4.77e-7)})])
    results.save(record, tmp_path)
    assert results.load(FuserVsCompile, tmp_path).rows == record.rows
    lines = summary(record).splitlines()
    assert len(lines) == 3 and "GPU µs" in lines[0] and "host µs/call" in lines[0]
    assert lines[1].split() == ["1,048,576", "fuser", "6.2", "85.2", "True", "0"]
    assert lines[2].split()[-2:] == ["False", "4.77e-07"]


@pytest.mark.skipif(not helpers.is_simulator(), reason="the simulator's answer")
def test_the_comparison_times_nothing_in_the_simulator():
    assert main_of("helpers.lessons.fuser", COMMANDS, []) == 0


@pytest.mark.skipif(not helpers.is_simulator(), reason="stands in for the GPU's clock in the simulator")
def test_the_comparison_checks_each_kernel_before_it_times_it(monkeypatch):
    timed = []

    def stand_in_timer(run, *, label="", repeats=1, **_):
        run()
        timed.append(label)
        return Timing(label, [0.5])

    monkeypatch.setattr(versus, "time_gpu", stand_in_timer)
    monkeypatch.setattr(versus, "host_enqueue_samples_us", lambda run, samples: [6.0, 7.0, 7.0, 7.0, 10.0])
    record = versus.measure((100, 300))
    assert [row.n for row in record.rows] == [100, 300]
    assert timed == ["fuser", "hand-written"] * 2  # torch.compile needs a GPU: left out, with its reason
    for row in record.rows:
        assert row.fuser_equals_hand_written and row.bytes_moved == 16 * row.n
        assert all(c.equals_numpy and c.gpu_ms == 0.5 and c.host_us == 7.0 and c.host_iqr_us == 0.0
                   for c in row.contenders.values())
