"""The grading machinery itself: fresh draws, poison, guard regions, tolerances, budgets, messages."""

from __future__ import annotations

import math
import re
import sys
from importlib import util
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers.checks import CheckFailed
from helpers.classroom import grading, reference
from helpers.counting import OutOfBounds
from helpers.ledger import Launch, Ledger, counting_engine
from helpers.lessons.inflight.kernels import copy_kernel
from helpers.sizes import BLOCK_SIZE, blocks_for

WRONG = Path(__file__).resolve().parent.parent / "notebooks" / "exercises" / "wrong"
sys.path.insert(0, str(WRONG))  # the known-wrong solutions and the right pieces they share (_parts)
from _parts.ex1 import saxpy_relu_kernel  # noqa: E402  (exercise 1's right kernel)
from _parts.ex4 import block_max_abs_kernel, divide_kernel  # noqa: E402  (exercise 4's right pieces)
from ex2_unfused import affine  # noqa: E402  (out = t * gamma + beta: a known-wrong solution's second kernel)


def saxpy_relu(a, x, y, out):
    saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)


@cuda.jit
def _nan_kernel(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (x[i] - x[i]) / (y[i] - y[i])  # 0 / 0: a computed NaN, not the poison


def nan_saxpy_relu(a, x, y, out):
    _nan_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)


def test_sizes_include_one_element_less_than_a_block_and_non_multiples():
    sizes = grading.check_sizes()
    assert sizes[0] == 1
    assert any(n < BLOCK_SIZE for n in sizes) and any(n > BLOCK_SIZE for n in sizes)
    assert all(n % BLOCK_SIZE for n in sizes)
    assert list(sizes) == sorted(sizes)


@pytest.mark.parametrize("number", sorted(grading.EXERCISES))
def test_every_call_draws_fresh_signed_inputs(number):
    exercise = grading.EXERCISES[number]
    first = exercise.draw(1000, np.random.default_rng())
    second = exercise.draw(1000, np.random.default_rng())
    arrays = [k for k, v in first.items() if isinstance(v, np.ndarray)]
    assert arrays
    for name in arrays:
        assert first[name].dtype == np.float32
        assert not np.array_equal(first[name], second[name]), f"{name} is not redrawn"
        assert np.unique(first[name]).size > 900, f"{name} is nearly uniform"
    assert any((first[name] < 0).mean() > 0.2 for name in arrays), "no input has a good share of negative values"


def test_a_correct_answer_passes_and_reports_its_count_but_not_the_budget():
    result = grading.grade(grading.EXERCISE_1, saxpy_relu)
    assert (result.trips, result.bytes_per_element) == (2, 12)
    assert len(result.ledger.launches) == 1
    assert result.summary() == (
        "exercise 1 passed: right values at every size tried, 1 launch, 2 trips, 12 bytes per element"
    )


def test_check_exercise_prints_one_line(capsys):
    assert grading.check_exercise_1(saxpy_relu) is None
    assert capsys.readouterr().out.strip().startswith("exercise 1 passed")


def test_a_computed_nan_is_not_mistaken_for_an_unwritten_element():
    with pytest.raises(CheckFailed, match=r"is nan, expected .*division by zero") as failure:
        grading.grade(grading.EXERCISE_1, nan_saxpy_relu)
    assert "never written" not in str(failure.value)


def test_passing_the_kernel_or_a_non_function_is_a_clear_error():
    with pytest.raises(TypeError, match="not the kernel itself"):
        grading.grade(grading.EXERCISE_1, saxpy_relu_kernel)
    with pytest.raises(TypeError, match="pass your function itself"):
        grading.grade(grading.EXERCISE_1, "saxpy_relu")


def test_tolerance_follows_the_dtype_and_the_size_of_the_terms():
    got = np.array([1.0, 1e-3], dtype=np.float32)
    want = np.array([1.0, 1e-3], dtype=np.float64)
    scale = np.array([1.0, 2.0])  # the second result is a small difference of terms of size 1
    off_by_an_ulp = got + np.spacing(got)
    assert grading._close(off_by_an_ulp, want, scale, np.float32).all()
    assert not grading._close(got * 1.001, want, scale, np.float32)[0]
    assert not grading._close(got + np.float32(1e-4), want, scale, np.float32)[1]


def test_a_write_into_the_guard_region_is_reported():
    """What a GPU shows for a missing bounds guard: the write lands past the end of the view."""
    n = 100
    inputs = grading.EXERCISE_1.draw(n, np.random.default_rng())
    buffers = grading._upload(inputs, ["out"], n)
    host = buffers.device["out"].copy_to_host()
    host[:n] = grading.EXERCISE_1.expect(inputs)["out"][0]
    host[n + 3] = 1.0
    buffers.device["out"].copy_to_device(host)
    with pytest.raises(CheckFailed, match=r"a thread indexed past the end of an array at n = 100: .* those with "
                                          r"i >= 100 must not touch the arrays\. Add a bounds guard"):
        grading._judge(grading.EXERCISE_1, inputs, buffers, n)


def test_an_input_that_was_changed_is_reported():
    n = 10
    inputs = grading.EXERCISE_1.draw(n, np.random.default_rng())
    buffers = grading._upload(inputs, ["out"], n)
    x = buffers.device["x"].copy_to_host()
    x[4] += 1
    buffers.device["x"].copy_to_device(x)
    with pytest.raises(CheckFailed, match=r"changed the input `x` \(element 4 first\)"):
        grading._judge(grading.EXERCISE_1, inputs, buffers, n)


def test_the_poison_is_a_nan_with_a_payload_that_arithmetic_does_not_make():
    n = 4
    buffers = grading._upload({}, ["out"], n)
    out = buffers.device["out"].copy_to_host()
    assert np.isnan(out).all()
    with np.errstate(invalid="ignore"):
        computed = np.array([np.float32(0.0) / np.float32(0.0), np.float32(np.inf) - np.float32(np.inf), np.nan], np.float32)
    assert not np.isin(grading._bits(computed), grading._bits(out[:n])).any()


def test_array_traffic_leaves_out_one_number_results():
    @cuda.jit
    def copy_and_count(x, out, count):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i]
        if i == 0:
            count[0] = x.size

    n = 300
    x = cuda.to_device(np.ones(n, np.float32))
    out = cuda.device_array(n, np.float32)
    count = cuda.device_array(1, np.float32)
    for engine in ("static", "dynamic"):
        with counting_engine(engine), Ledger("copy") as ledger:
            copy_and_count[blocks_for(n), BLOCK_SIZE](x, out, count)
        assert grading.array_traffic(ledger) == (2, 8), engine  # the one-number `count` is left out


def _no_guard():
    """The known-wrong solution of exercise 1 without a bounds guard."""
    path = WRONG / "ex1_no_guard.py"
    spec = util.spec_from_file_location("ex1_no_guard", path)
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_index_past_the_end_gets_one_message_from_either_engine():
    """The simulator stops the thread (IndexError); on a GPU the compiled code shows the access and
    the write lands in the guard region.  The student reads the same words every way."""
    expected = ("a thread indexed past the end of an array at n = 1: a launch rounds the threads up to whole "
                "blocks, and those with i >= 1 must not touch the arrays. Add a bounds guard, `if i < out.size:`, "
                "or check the one you have (`<`, not `<=`)")
    for engine in ("dynamic", "static"):
        with counting_engine(engine), pytest.raises(CheckFailed) as failure:
            grading.grade(grading.EXERCISE_1, _no_guard().saxpy_relu)
        assert str(failure.value) == expected, engine


# --- predictions -------------------------------------------------------------------------


@cuda.jit
def _sub(x, mean, t):
    i = cuda.grid(1)
    if i < t.size:
        t[i] = x[i] - mean


@cuda.jit
def _scale(t, inv_std, u):
    i = cuda.grid(1)
    if i < u.size:
        u[i] = t[i] * inv_std


def three_kernel_normalize(x, mean, inv_std, gamma, beta, out):
    t, u = cuda.device_array_like(x), cuda.device_array_like(x)
    blocks = blocks_for(out.size)
    _sub[blocks, BLOCK_SIZE](x, mean, t)
    _scale[blocks, BLOCK_SIZE](t, inv_std, u)
    affine[blocks, BLOCK_SIZE](u, gamma, beta, out)


def test_prediction_2_is_compared_with_the_measured_ledger(capsys):
    # a three-kernel variant: 6 trips, 8 + 8 + 16 = 32 bytes per element
    ledger = grading.check_prediction_2(three_kernel_normalize, unfused_trips=6, unfused_bytes_per_element=32,
                                        fused_trips=2, fused_bytes_per_element=16)
    assert ledger.trips == 6
    assert "your predictions match: 3 kernels make 6 trips and move 32 bytes" in capsys.readouterr().out
    _says(grading.check_prediction_2, three_kernel_normalize, (3, 40, 1, 20), {6, 32, 2, 16},
          "3 trips for the given kernels is too few", "40 bytes per element for the given kernels is too many",
          "`mean` and `inv_std` are numbers", "1 trip for one fused kernel is too few",
          "20 bytes per element fused is too many")


def _says(check, unfused, predicted, answers, *parts):
    """``check`` refuses the four ``predicted`` numbers with every one of ``parts``, and none of ``answers``."""
    names = ("unfused_trips", "unfused_bytes_per_element", "fused_trips", "fused_bytes_per_element")
    with pytest.raises(CheckFailed) as failure:
        check(unfused, **dict(zip(names, predicted)))
    message = str(failure.value)
    assert all(part in message for part in parts), message
    assert _numbers_in(message).isdisjoint(answers), message  # the right answers are not given away


def _numbers_in(message: str) -> set[float]:
    """The numbers a message states, as numbers (not the digits inside a word such as float32)."""
    return {float(x) for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])", message)}


@pytest.mark.parametrize("number, right", [(2, (8, 40, 2, 16)), (3, (6, 36, 2, 20)), (5, (8, 48, 2, 28))])
def test_no_wrong_prediction_is_told_the_right_answer(number, right):
    """Each prediction of the exercise's own given pipeline wrong in turn, below and above: the message says which
    way, never the right number; a right number written as a float, or a hair off for bytes, passes."""
    module = reference.reference_module(number)
    unfused = getattr(module, f"{grading.EXERCISES[number].unfused}")
    check = getattr(grading, f"check_prediction_{number}")
    names = ("unfused_trips", "unfused_bytes_per_element", "fused_trips", "fused_bytes_per_element")
    check(unfused, **dict(zip(names, (float(r) for r in right))))
    check(unfused, **dict(zip(names, (r + 1e-12 * ("bytes" in n) for n, r in zip(names, right)))))
    for k, name in enumerate(names):
        for wrong, way in ((right[k] - 1, "too few"), (0, "too few"), (right[k] + 4, "too many")):
            predicted = dict(zip(names, right), **{name: wrong})
            with pytest.raises(CheckFailed) as failure:
                check(unfused, **predicted)
            message = str(failure.value)
            assert re.search(rf"(^|[?.] ){wrong} (trips?|bytes) .* is {way}", message), message
            assert right[k] not in _numbers_in(message) - set(predicted.values()), message


def test_a_prediction_about_a_fused_function_asks_for_the_given_pipeline():
    fused = reference.reference_module(2).normalize_fused
    with pytest.raises(grading.BadArgument) as failure:
        grading.check_prediction_2(fused, unfused_trips=2, unfused_bytes_per_element=16,
                                   fused_trips=2, fused_bytes_per_element=16)
    assert str(failure.value) == ("`normalize_fused` made 2 trips in 1 launch, no more than one fused kernel needs: "
                                  "the predictions are about the given pipeline, so pass `normalize_unfused` itself")


def test_a_prediction_left_empty_is_named():
    with pytest.raises(CheckFailed, match="`fused_trips` should be an int or a float"):
        grading.check_prediction_2(three_kernel_normalize, unfused_trips=8, unfused_bytes_per_element=40,
                                   fused_trips=..., fused_bytes_per_element=16)


def test_prediction_4(capsys):
    assert grading.check_prediction_4(minimal_trips=3, minimal_bytes_per_element=12) is None
    assert capsys.readouterr().out.startswith("right: 3 trips and 12 bytes per element, against 2 trips")
    assert grading.check_prediction_4(minimal_trips=3.0, minimal_bytes_per_element=12.0) is None
    with pytest.raises(CheckFailed, match="cannot wait for the threads of every other block: how many times") as two:
        grading.check_prediction_4(minimal_trips=2, minimal_bytes_per_element=12)
    assert "second time" not in str(two.value) and "3" not in str(two.value)  # a hint, not the answer
    for typed in (12.004, 12.0000001, 11.5):  # a wrong number is shown as typed, never rounded to a right-looking one
        with pytest.raises(CheckFailed, match=f"^{re.escape(str(typed))} bytes per element does not match your trips"):
            grading.check_prediction_4(minimal_trips=3, minimal_bytes_per_element=typed)
    with pytest.raises(CheckFailed, match="^1 trip is too few: any kernel that computes out from x"):
        grading.check_prediction_4(minimal_trips=1, minimal_bytes_per_element=12)
    for trips in (4, 5, 6):
        with pytest.raises(CheckFailed, match=f"^{trips} trips is more than needed: .* keep running maxima"):
            grading.check_prediction_4(minimal_trips=trips, minimal_bytes_per_element=12)
    with pytest.raises(CheckFailed, match="^16 bytes per element does not match your trips"):
        grading.check_prediction_4(minimal_trips=3, minimal_bytes_per_element=16)
    with pytest.raises(CheckFailed) as failure:  # bytes that follow from wrong trips are not a second mistake
        grading.check_prediction_4(minimal_trips=2, minimal_bytes_per_element=8)
    assert "8 bytes per element is right for your 2 trips: fix the trips and the bytes follow" in str(failure.value)
    assert "does not match" not in str(failure.value)


@cuda.jit
def _stale(partial):
    i = cuda.grid(1)
    if i < partial.size:
        partial[i] = 1000.0  # what earlier work left in memory, larger than any |x| drawn


def normalize_by_max_stale_partial(x, out):
    """Exercise 4 with `partial` longer than the blocks that write it: the second stage reads stale values."""
    blocks = min(blocks_for(x.size), 1024)
    partial, m = cuda.device_array(1024, dtype=x.dtype), cuda.device_array(1, dtype=x.dtype)
    _stale[4, BLOCK_SIZE](partial)
    block_max_abs_kernel[blocks, BLOCK_SIZE](x, partial)
    block_max_abs_kernel[1, BLOCK_SIZE](partial, m)
    divide_kernel[blocks_for(x.size), BLOCK_SIZE](x, m, out)


def test_exercise_4_divided_by_more_than_the_largest_magnitude_asks_about_unwritten_partial_maxima():
    with pytest.raises(CheckFailed, match=r"divided by about 1000, more than the largest \|x\| .* elements of "
                                          r"`partial` that no block wrote\?"):
        grading.check_exercise_4(normalize_by_max_stale_partial)


# --- promises pinned: fresh inputs on every call, and the sizes tried ---------------------------


class _Spy:
    """A correct exercise-1 solution that remembers the inputs and sizes it was given."""

    def __init__(self) -> None:
        self.x: list[np.ndarray] = []
        self.sizes: list[int] = []

    def __call__(self, a, x, y, out):
        self.x.append(x.copy_to_host())
        self.sizes.append(out.size)
        saxpy_relu(a, x, y, out)


def test_every_grade_draws_fresh_inputs():
    """Hard-wiring grade() to one seed would hand out the same inputs on every call."""
    first, second = _Spy(), _Spy()
    grading.grade(grading.EXERCISE_1, first)
    grading.grade(grading.EXERCISE_1, second)
    for a, b in zip(first.x, second.x):
        assert not np.array_equal(a, b), f"the same {a.size} inputs were drawn twice"
    seeded = [_Spy(), _Spy()]
    for spy in seeded:
        grading.grade(grading.EXERCISE_1, spy, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(*(s.x for s in seeded))), "an explicit seed repeats the draw"


def test_grade_tries_every_documented_size():
    """The documented sizes: one element, less than a block, just past a block, several blocks, and past
    a grid written into the code (16 blocks of 256 threads)."""
    spy = _Spy()
    result = grading.grade(grading.EXERCISE_1, spy)
    assert tuple(spy.sizes) == result.sizes == grading.check_sizes()
    assert set(grading.SIMULATOR_SIZES) >= {1, 100, 257, 1000}
    assert max(grading.SIMULATOR_SIZES) > 16 * 256
    if helpers.is_simulator():
        assert grading.check_sizes() == (1, 100, 257, 1000, 4099)
    else:
        assert set(grading.check_sizes()) >= {1, 100, 257, 1000, 4099, 65_537, 1_048_579}


def test_a_solution_right_only_at_small_sizes_fails():
    """Pins the largest size: a kernel that covers at most 300 elements must fail at 1000."""

    @cuda.jit
    def capped(a, x, y, out):
        i = cuda.grid(1)
        if i < min(out.size, 300):
            out[i] = max(a * x[i] + y[i], 0.0)

    def saxpy_relu_capped(a, x, y, out):
        capped[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)

    with pytest.raises(CheckFailed, match=r"element \d+ of `out` was never written \(700 of 1000"):
        grading.grade(grading.EXERCISE_1, saxpy_relu_capped)


# --- host cheats and duplicate writes ---------------------------------------------------------------


@cuda.jit
def _nothing(out):
    pass


def _on_the_host(a, x, y, out):
    """Exercise 1's answer computed on the host and copied into `out`; the kernel it launches does nothing."""
    out.copy_to_device(np.maximum(a * x.copy_to_host() + y.copy_to_host(), 0).astype(np.float32))
    _nothing[1, 1](out)


def test_a_result_copied_from_the_host_is_rejected_whatever_the_kernel():
    with pytest.raises(CheckFailed, match=r"`out` was written by a copy from the host .*not by your kernel") as failure:
        grading.grade(grading.EXERCISE_1, _on_the_host)
    assert "it copied `x` and `y` to the host first" in str(failure.value)


@pytest.mark.parametrize("n", [2, 100, 1000])
def test_a_result_copied_from_the_host_is_rejected_at_every_size_but_one_element(n):
    """The copy watch is off at n = 1 only, where a one-number helper array is as large as the problem."""
    with pytest.raises(CheckFailed, match=rf"`out` was written by a copy from the host .*{n} elements"):
        grading.grade(grading.EXERCISE_1, _on_the_host, sizes=(n,))


def test_a_kernel_launched_on_host_copies_is_told_so_in_the_graders_words():
    def on_host_copies(a, x, y, out):
        xh, yh = x.copy_to_host(), y.copy_to_host()
        saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, xh, yh, out)

    with pytest.raises(CheckFailed) as failure:
        grading.grade(grading.EXERCISE_1, on_host_copies)
    message = str(failure.value)
    assert message.startswith("`xh`, an argument of `saxpy_relu_kernel`, is a host NumPy array")
    assert "launch your kernel on them" in message and "allow_host_arrays" not in message


def test_the_copy_watch_restores_numba_and_ignores_small_helper_arrays():
    from helpers.classroom.watch import Copies

    before = (cuda.to_device,)
    with Copies() as watch:
        small = cuda.to_device(np.zeros(3, np.float32))
        big = cuda.to_device(np.zeros(500, np.float32))
        big.copy_to_device(np.ones(500, np.float32))
        big.copy_to_device(small[:3].copy_to_host().repeat(167)[:500])
        big.copy_to_host()
    assert (cuda.to_device,) == before
    assert [c.elements for c in watch.from_host(100)] == [500, 500, 500]
    assert [c.elements for c in watch.to_host(100)] == [500]
    with Copies() as quiet:
        cuda.to_device(np.zeros(500, np.float32))
    assert len(quiet.copies) == 1 and not watch.from_host(1000)


def test_a_correct_solution_with_a_small_scratch_array_from_the_host_passes():
    """A one-number helper array initialised from the host is not a host computation."""

    def with_scratch(a, x, y, out):
        cuda.to_device(np.zeros(1, np.float32))
        saxpy_relu(a, x, y, out)

    assert grading.grade(grading.EXERCISE_1, with_scratch).trips == 2


def test_duplicate_writes_name_the_threads():
    n = 10
    value = np.arange(1.0, n + 1.0)
    got = np.full(n, np.nan, np.float32)
    got[: n // 2] = value[1::2]  # element k holds element 2k + 1's result
    missing = np.arange(n // 2, n)
    message = grading._duplicate_writes("out", got, value, np.ones(n), missing)
    assert message.startswith("out[1] was written by threads 2 and 3 (it holds the result of element 3)")
    assert "`out[i // 2]`" in message
    got[: n // 2] = value[: n // 2]  # every written element holds its own value: nothing to say
    assert grading._duplicate_writes("out", got, value, np.ones(n), missing) is None


def test_check_by_number_and_unknown_numbers():
    with pytest.raises(ValueError, match="there is no exercise 9"):
        grading.check(9, saxpy_relu)


def test_prediction_5_counts_the_given_launches(capsys):
    module = reference.reference_module(5)
    ledger = grading.check_prediction_5(module.adamw_step_unfused, unfused_trips=8, unfused_bytes_per_element=48,
                                        fused_trips=2, fused_bytes_per_element=28)
    assert len(ledger.launches) == 4
    assert "your predictions match: 4 kernels make 8 trips and move 48 bytes" in capsys.readouterr().out
    _says(grading.check_prediction_5, module.adamw_step_unfused, (8, 40, 2, 32), {48, 28},
          "40 bytes per element for the given kernels is too few", "(an array updated in place counts both ways)",
          "`lr`, `weight_decay`, `beta1`, `beta2`, `eps`, `correction1` and `correction2` are numbers, passed with "
          "each launch", "cost nothing. 32 bytes per element fused is too many")


def test_a_prediction_names_the_numbers_the_given_kernels_receive_and_joins_its_problems_as_sentences():
    """Exercise 5's kernels receive the two bias corrections, not `step`; problems read as sentences."""
    module = reference.reference_module(5)
    with pytest.raises(CheckFailed) as failure:
        grading.check_prediction_5(module.adamw_step_unfused, unfused_trips=4, unfused_bytes_per_element=44,
                                   fused_trips=2, fused_bytes_per_element=32)
    message = str(failure.value)
    assert "`step`" not in message and "?;" not in message and ";;" not in message, message
    assert "does it write one (another)? 44 bytes per element for the given kernels is too few" in message
    assert "`correction1` and `correction2` are numbers" in message


# --- verdicts that must not depend on the size or the backend ---------------------------


def _upload_results(exercise, inputs, n, results):
    """Buffers as a kernel that wrote ``results`` (name -> values) would leave them."""
    buffers = grading._upload(inputs, list(exercise.outputs), n)
    for name, values in results.items():
        host = buffers.device[name].copy_to_host()
        host[:n] = values
        buffers.device[name].copy_to_device(host)
    return buffers


def test_a_wrong_update_that_rounds_back_here_and_there_is_judged_by_value_not_called_unwritten():
    """Seen on an H200 at n = 1,048,579: a few elements of a wrong AdamW step round back to the old
    parameter.  They are part of a wrong update, not elements skipped or written by another thread."""
    n, exercise = 1000, grading.EXERCISE_5
    inputs = exercise.draw(n, np.random.default_rng())
    l2 = next(a for a in exercise.alternatives if "L2" in a.message)
    results = {name: np.asarray(v, np.float32) for name, v in l2.outputs(inputs).items()}
    buffers = _upload_results(exercise, inputs, n, results)
    with pytest.raises(CheckFailed, match="weight decay to the gradient, so it went into m and v"):
        grading._judge(exercise, inputs, buffers, n)
    results["param"][[13, 400, 777]] = inputs["param"][[13, 400, 777]]  # unchanged there, as rounding leaves them
    buffers = _upload_results(exercise, inputs, n, results)
    with pytest.raises(CheckFailed, match=r"element \d+ of `param` is .* elements are wrong at n = 1000") as failure:
        grading._judge(exercise, inputs, buffers, n)
    assert "never updated" not in str(failure.value) and "holds the result" not in str(failure.value)
    results = {name: np.asarray(v[0], np.float32) for name, v in exercise.expect(inputs).items()}
    results["param"][n - 5:] = inputs["param"][n - 5:]  # right, but the last five skipped: that is unwritten
    buffers = _upload_results(exercise, inputs, n, results)
    with pytest.raises(CheckFailed, match=r"element 999 of `param` was never updated \(5 of 1000"):
        grading._judge(exercise, inputs, buffers, n)


def test_one_value_that_matches_another_element_by_chance_is_not_a_duplicate_write():
    rng = np.random.default_rng()
    n = 100_000
    want = rng.standard_normal(n).astype(np.float32)
    scale = np.abs(want)
    got = want * np.float32(1.5)  # a wrong formula everywhere ...
    got[13] = want[50_001]  # ... one value of which happens to be another element's result
    missing = np.array([7, 9])
    assert grading._duplicate_writes("out", got, want.astype(np.float64), scale, missing) is None
    got = want[np.arange(n) * 2 % n]  # out[i // 2] = ...: nearly every written value is another's result
    message = grading._duplicate_writes("out", got, want.astype(np.float64), scale, np.arange(n // 2, n))
    assert message is not None and "several threads wrote the same element" in message


def test_an_access_past_the_end_seen_only_in_the_compiled_code_is_a_missing_guard():
    """On a GPU a kernel without a guard can copy a guard's NaN onto itself, unseen; its PTX shows
    the access, and the student is told to add the guard, as the simulator's IndexError tells them."""
    refusal = OutOfBounds("adamw_kernel: a thread would access grad[1000], outside the array (size 1000)")
    ledger = Ledger("adamw_step")
    ledger.launches.append(Launch("adamw_kernel", 1024, [], "ptx", uncounted=str(refusal), refusal=refusal))
    with pytest.raises(CheckFailed, match=r"indexed past the end of an array at n = 1000: .* Add a bounds guard, "
                                          r"`if i < param.size:`"):
        grading._check_compiled_bounds(grading.EXERCISE_5, ledger, 1000)
    with pytest.raises(CheckFailed, match=r"indexed past the end of an array at n = 1000"):
        grading._budget(grading.EXERCISE_5, ledger, 1000)


def test_the_counters_own_copies_are_not_taken_for_the_students():
    """On a GPU the dynamic engine copies a launch's arrays to a simulator subprocess; the grader's
    watch of host copies must not blame the student for them (it once said `out` was copied)."""
    from helpers.classroom.watch import Copies
    from helpers.counting import traffic

    x, out = cuda.to_device(np.ones(300, np.float32)), cuda.device_array(300, np.float32)
    with Copies({id(out): "out"}) as watch:
        traffic._simulate_in_subprocess(copy_kernel, 2, BLOCK_SIZE, (x, out), ["x", "out"])
    assert watch.copies == []
    with Copies({id(out): "out"}) as watch:
        out.copy_to_host()
    assert [(c.direction, c.target) for c in watch.copies] == [("to host", "out")]


# --- grader edges: predictions, the byte budget, stubs, signatures, returned results ---------------


def test_a_prediction_that_is_not_a_finite_number_is_refused():
    for value in (float("nan"), float("inf"), -float("inf"), np.float32("nan")):
        with pytest.raises(CheckFailed, match=r"`minimal_trips` is .*: a prediction is a finite number"):
            grading.check_prediction_4(minimal_trips=value, minimal_bytes_per_element=12)
    with pytest.raises(CheckFailed, match=r"`fused_trips` is nan"):
        grading.check_prediction_2(three_kernel_normalize, unfused_trips=6, unfused_bytes_per_element=32,
                                   fused_trips=float("nan"), fused_bytes_per_element=16)
    with pytest.raises(CheckFailed, match="should be an int or a float"):
        grading.check_prediction_4(minimal_trips=np.complex64(3), minimal_bytes_per_element=12)
    for huge in (10**400, -10**5000):  # past float's range, and past what str() converts
        with pytest.raises(CheckFailed, match=r"`minimal_trips` is larger than any float: a prediction is a number"):
            grading.check_prediction_4(minimal_trips=huge, minimal_bytes_per_element=12)
    with pytest.raises(CheckFailed, match=r"`minimal_trips` is -1: trips and bytes are never negative"):
        grading.check_prediction_4(minimal_trips=-1, minimal_bytes_per_element=12)
    with pytest.raises(CheckFailed, match=r"`minimal_trips` is 2.5: a trip count is a whole number"):
        grading.check_prediction_4(minimal_trips=2.5, minimal_bytes_per_element=12)
    with pytest.raises(CheckFailed, match="should be an int or a float"):
        grading.check_prediction_4(minimal_trips=np.timedelta64(3), minimal_bytes_per_element=12)


def test_an_over_predicted_trip_count_is_refused():
    """Predicting more trips than the ledger counts is as wrong as predicting fewer."""
    with pytest.raises(CheckFailed, match="20 trips for the given kernels is too many"):
        grading.check_prediction_2(three_kernel_normalize, unfused_trips=20, unfused_bytes_per_element=32,
                                   fused_trips=2, fused_bytes_per_element=16)


def test_the_stub_is_recognised_by_the_lines_the_release_script_writes():
    import sys

    from helpers.classroom.exercise import STUB

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import release_exercises

    assert list(STUB) == release_exercises.CODE_STUB

    def guarded(a, x, y, out):
        if x.dtype != np.float64:  # a correct solution may refuse what it does not support
            saxpy_relu(a, x, y, out)
        else:
            raise NotImplementedError("float64 is not supported")

    assert grading.grade(grading.EXERCISE_1, guarded).trips == 2

    def bare(a, x, y, out):  # the stub's raise without its comment line: still the stub, when it runs
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="is still the exercise stub"):
        grading.grade(grading.EXERCISE_1, bare)


def test_a_wrong_signature_is_told_the_expected_one():
    with pytest.raises(CheckFailed) as failure:
        grading.grade(grading.EXERCISE_1, lambda a, x, y: None)
    assert str(failure.value) == ("`saxpy_relu` must take the 4 arguments `saxpy_relu(a, x, y, out)`, in this "
                                  "order; yours takes (a, x, y)")
    with pytest.raises(CheckFailed, match=r"yours takes \(a, x, y, out, extra\)"):
        grading.grade(grading.EXERCISE_1, lambda a, x, y, out, extra: None)


def test_a_function_that_returns_its_result_or_makes_a_new_out_is_told_so():
    def returns(a, x, y, out):
        result = cuda.device_array_like(out)
        saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, result)
        return result

    def rebinds(a, x, y, out):
        out = cuda.device_array_like(x)
        saxpy_relu_kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)

    with pytest.raises(CheckFailed, match=r"`saxpy_relu` returned a value \(\w+\) and `out` was never written") as failure:
        grading.grade(grading.EXERCISE_1, returns)
    assert "bounds guard" not in str(failure.value)
    with pytest.raises(CheckFailed, match=r"assigns a new array to its parameter `out` \(`out = \.\.\.`\)") as failure:
        grading.grade(grading.EXERCISE_1, rebinds)
    assert "bounds guard" not in str(failure.value)


@pytest.mark.parametrize("call, words", [
    (lambda: grading.grade(grading.EXERCISE_1, saxpy_relu, sizes=[]), "`sizes` is empty"),
    (lambda: grading.grade(grading.EXERCISE_1, saxpy_relu, sizes=[-5]), "at least 1 element, got -5"),
    (lambda: grading.grade(grading.EXERCISE_1, saxpy_relu, sizes=[2.5]), r"round it: int\(2.5\)"),
    (lambda: grading.grade(grading.EXERCISE_1, saxpy_relu, sizes=100), "must be a list of element counts"),
    (lambda: grading.grade(grading.EXERCISE_1, saxpy_relu, seed="abc"), "`seed` must be a whole number"),
    (lambda: grading.grade(grading.EXERCISE_1, saxpy_relu, seed=-1), "`seed` must be a whole number >= 0"),
    (lambda: grading.check(True, saxpy_relu), "there is no exercise True"),
    (lambda: grading.check(1.0, saxpy_relu), "there is no exercise 1.0"),
], ids=["no sizes", "negative size", "fractional size", "one number", "seed text", "negative seed",
        "True", "1.0"])
def test_a_check_called_the_wrong_way_says_what_to_pass(call, words):
    with pytest.raises(grading.BadArgument, match=words):
        call()


def test_sizes_are_tried_smallest_first_and_the_budget_at_the_largest():
    spy = _Spy()
    result = grading.grade(grading.EXERCISE_1, spy, sizes=(1000, 1))
    assert tuple(spy.sizes) == result.sizes == (1, 1000)
    assert result.ledger.elements == 1000


def test_when_two_known_mistakes_give_the_same_values_neither_is_named():
    """A diagnosis is given only when one known mistake alone explains the values (a larger size decides)."""
    import dataclasses

    no_relu = grading.EXERCISE_1.alternatives[0]
    twin = dataclasses.replace(no_relu, message="the same values, another story")
    exercise = dataclasses.replace(grading.EXERCISE_1, alternatives=(no_relu, twin))
    n = 300
    inputs = exercise.draw(n, np.random.default_rng(0))
    values = np.asarray(no_relu.outputs(inputs)["out"], np.float32)
    buffers = _upload_results(exercise, inputs, n, {"out": values})
    with pytest.raises(CheckFailed) as failure:
        grading._judge(exercise, inputs, buffers, n)
    assert "apply the ReLU" not in str(failure.value) and "another story" not in str(failure.value)
    assert "elements are wrong at n = 300" in str(failure.value)


@cuda.jit
def _adamw_decay_last(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, correction1, correction2):
    i = cuda.grid(1)
    if i < param.size:
        g = grad[i]
        m_new = beta1 * m[i] + (1 - beta1) * g
        v_new = beta2 * v[i] + (1 - beta2) * g * g
        m[i] = m_new
        v[i] = v_new
        p = param[i] - lr * (m_new / correction1) / (math.sqrt(v_new / correction2) + eps)
        param[i] = p - lr * weight_decay * p  # the decay after the update, not before


def adamw_decay_last(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step):
    _adamw_decay_last[blocks_for(param.size), BLOCK_SIZE](param, grad, m, v, lr, beta1, beta2, eps, weight_decay,
                                                          1 - beta1**step, 1 - beta2**step)


def test_wrong_values_are_reported_at_the_largest_size_where_the_most_elements_tell():
    with pytest.raises(CheckFailed) as failure:
        grading.grade(grading.EXERCISE_5, adamw_decay_last)
    largest = grading.check_sizes()[-1]
    assert f"elements are wrong at n = {largest};" in str(failure.value)


# --- grids written into the code -------------------------------------------------------------


def test_a_grid_larger_than_every_size_is_also_tried_one_size_past_it():
    """A grid that stays the same at every size is tried at one more size, past its threads."""

    def wide_fixed_grid(a, x, y, out):
        saxpy_relu_kernel[20, BLOCK_SIZE](a, x, y, out)

    with pytest.raises(CheckFailed, match=r"`saxpy_relu_kernel` was launched with 5120 threads \(20 blocks of 256\) "
                                          r"at every size, so at n = (\d+) its grid does not cover n") as failure:
        grading.grade(grading.EXERCISE_1, wide_fixed_grid)
    # The simulator's sizes stop below 5120, so it tries 5123; a GPU's own sizes already go past it.
    past = int(re.search(r"at n = (\d+)", str(failure.value)).group(1))
    assert past == (5123 if helpers.is_simulator() else min(n for n in grading.GPU_SIZES if n > 5120))

    @cuda.jit
    def strided(a, x, y, out):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = max(a * x[i] + y[i], 0.0)

    def wide_grid_stride(a, x, y, out):
        strided[20, BLOCK_SIZE](a, x, y, out)

    # A grid-stride loop covers every n: graded at each size, plus 5123 where the sizes stop below its threads.
    extra = (5123,) if max(grading.check_sizes()) < 5123 else ()
    assert grading.grade(grading.EXERCISE_1, wide_grid_stride).sizes == grading.check_sizes() + extra


# --- kernels a GPU does not compile -----------------------------------------------------------


@cuda.jit
def _summing_a_list(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(sum([a * x[i], y[i]]), 0.0)


def _relu_plain(v):
    return max(v, 0.0)


@cuda.jit
def _calling_a_plain_function(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _relu_plain(a * x[i] + y[i])


@pytest.mark.parametrize("kernel, reason", [
    (_summing_a_list, r"`_summing_a_list` does not compile for a GPU: No implementation of function "
                      r"Function\(<built-in function sum>\) found for signature"),
    (_calling_a_plain_function, r"`_calling_a_plain_function` does not compile for a GPU: Untyped global name "
                                r"'_relu_plain': Cannot determine Numba type of <class 'function'>\. A kernel can "
                                r"call only functions compiled for the device"),
], ids=["a list", "a plain function"])
def test_a_kernel_a_gpu_cannot_compile_fails_on_every_backend(kernel, reason):
    """The simulator runs these as Python, with the right values; the grader compiles them for a GPU."""

    def launch(a, x, y, out):
        kernel[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)

    with pytest.raises(CheckFailed, match=reason) as failure:
        grading.grade(grading.EXERCISE_1, launch)
    assert "/" not in str(failure.value).split("does not compile for a GPU:")[1]  # no machine paths


def test_the_compilers_reason_is_one_short_sentence_without_paths():
    from helpers.classroom.compiled import compiler_reason

    text = ("numba.cuda.core.errors.TypingError: Failed in cuda mode pipeline (step: nopython frontend)\n"
            "Unknown attribute 'foo' of type Module(<module 'numpy' from '/home/me/.venv/lib/numpy/__init__.py'>)\n"
            "\nFile \"/home/me/course/ex1.py\", line 7:\ndef k(x):\n    <source elided>\n\nDuring: typing of get attribute")
    assert compiler_reason(text) == "Unknown attribute 'foo' of type Module(<module 'numpy' from '__init__.py'>)"


# --- copies between device arrays, and outputs no kernel wrote ------------------------------------


def test_the_copy_watch_sees_copies_and_assignments_on_the_device_but_not_a_kernels_stores():
    from helpers.classroom.watch import ON_DEVICE, Copies

    n = 300
    out, tmp = cuda.device_array(n, np.float32), cuda.to_device(np.ones(n, np.float32))
    x = cuda.to_device(np.ones(n, np.float32))
    with Copies({id(out): "out", id(x): "x"}) as watch:
        out.copy_to_device(tmp)
        out[:] = tmp
        out[:100] = 0.0
        cuda.to_device(x, to=out)
        cuda.to_device(tmp)  # on a GPU the same array comes back: no copy
        copy_kernel[blocks_for(n), BLOCK_SIZE](x, out)
    seen = [(c.direction, c.elements, c.how, c.target, c.source) for c in watch.copies]
    assert seen == [
        (ON_DEVICE, n, "out.copy_to_device(...)", "out", None),
        (ON_DEVICE, n, "out[...] = ...", "out", None),
        (ON_DEVICE, 100, "out[...] = ...", "out", None),
        (ON_DEVICE, n, "cuda.to_device(..., to=...)", "out", "x"),
    ]
    assert [c.elements for c in watch.on_device(n)] == [n, n, n]


def test_a_pass_needs_every_output_element_stored_by_a_kernel():
    """The last line of defence: an output no kernel wrote cannot pass, whatever else was seen."""
    from helpers.ledger import ArrayTraffic

    n = 1000
    empty = Ledger("saxpy_relu")
    empty.launches.append(Launch("nothing", 1, [ArrayTraffic("out", 4, n, 0, 0)], "simulator"))
    with pytest.raises(CheckFailed, match=r"your kernels stored 0 elements into the n-element arrays, but `out` "
                                          r"holds 1000: the rest reached them without a kernel"):
        grading._budget(grading.EXERCISE_1, empty, n)
    half = Ledger("saxpy_relu")
    half.launches.append(Launch("k", n, [ArrayTraffic("x", 4, n, 4 * n, 0), ArrayTraffic("out", 4, n, 0, 2 * n)],
                                "simulator"))
    with pytest.raises(CheckFailed, match="stored 500 elements"):
        grading._budget(grading.EXERCISE_1, half, n)


# --- what the static counter cannot follow ------------------------------------------------------


def test_a_data_dependent_branch_is_counted_by_running_the_kernel_and_an_address_stays_refused():
    from helpers.counting.record import DataDependentBranch

    refusal = DataDependentBranch("k: cannot count k: whether it runs depends on a value loaded from memory")
    ledger = Ledger("saxpy_relu")
    ledger.launches.append(Launch("k", 256, [], "ptx", uncounted=str(refusal), refusal=refusal))
    with pytest.raises(CheckFailed) as failure:
        grading._budget(grading.EXERCISE_1, ledger, 100)  # no way to count it by running: the branch's words
    assert "runs only for some values" in str(failure.value) and "atomic" not in str(failure.value)

    @cuda.jit
    def loaded_index(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            j = i + int(x[i] * 0.0)  # always i, but computed from a loaded value
            out[j] = max(a * x[i] + y[i], 0.0)

    def saxpy_relu_loaded(a, x, y, out):
        loaded_index[blocks_for(out.size), BLOCK_SIZE](a, x, y, out)

    with counting_engine("static"), pytest.raises(CheckFailed) as failure:
        grading.grade(grading.EXERCISE_1, saxpy_relu_loaded, sizes=[100, 257])
    assert "an index loaded from memory (`x[idx[i]]`)" in str(failure.value)
    assert "runs only for some values" not in str(failure.value)


def test_two_threads_racing_for_one_element_are_named_whichever_wins():
    """On a GPU either of two threads writing `out[i // 2]` may land last; half of ReLU's results are 0, which
    match many elements and so tell nothing: the diagnosis must not depend on which thread won."""
    from helpers.classroom.exercises.ex1 import _draw_1, _expect_1

    for seed in range(40):
        rng = np.random.default_rng(seed)
        for n in (100, 1003):
            inputs = _draw_1(n, rng)
            value, scale = _expect_1(inputs)["out"]
            result = np.maximum(inputs["a"] * inputs["x"] + inputs["y"], np.float32(0))
            winner = np.minimum(np.arange(0, n, 2) + (rng.random((n + 1) // 2) < 0.5), n - 1)
            got = np.full(n, np.nan, np.float32)
            got[: winner.size] = result[winner]
            message = grading._duplicate_writes("out", got, value, scale, np.flatnonzero(np.isnan(got)))
            assert message is not None and "was written by threads" in message and "out[i // 2]" in message, message
