"""Checks for the classroom exercises: right values, every element, *and* the fusion.

Call one from a notebook cell with the function you wrote::

    from helpers.classroom import grading
    grading.check_exercise_1(saxpy_relu)      # or grading.check(1, saxpy_relu)

The exercises themselves are data (:mod:`helpers.classroom.exercises`, one module
each); this module is the engine that grades any of them, one verdict on every backend.

Every call draws fresh random inputs (signed, not uniform: a formula that is only
right for all-equal or all-positive data fails), at sizes that are not a multiple
of the block size, from one element to more than a grid written into the code
would cover.  Each run (:mod:`.running`) poisons the outputs, puts a guard region
after every array, and watches the copies and the launches:

* a kernel a GPU's compiler refuses fails, in the simulator too (:mod:`.compiled`);
* an index past the end gives one message, whichever way it was seen: "a thread
  indexed past the end of an array at n = 1 ...: add a bounds guard";
* a result copied into an output (from the host, or from another device array) is
  rejected, whatever kernel is launched for show;
* elements never written are explained when the run shows why: several threads
  wrote one element (``out[i // 2]``, read from the values), the function returned
  its result or assigned a new array to ``out``, or a grid written into the code does
  not cover n (a grid that stayed the same at every size is also tried at one size
  past it).

Last, the launches are recorded with :class:`helpers.ledger.Ledger` and the trips
and bytes per element are held to the exercise's budget, so a correct answer that
is not fused still fails: "you made 6 trips ... (...), more than this computation needs", with a hint
that names no budget (the budgets are graded answers).  The given pipeline itself is refused by name.
Only traffic to the n-element arrays counts; a one-number result (a maximum kept
in a one-element array) is left out.  Where the compiled code cannot say which
elements a store touches because it runs only for some values (``if v > 0:
out[i] = v``), the launches are counted by running them (the dynamic engine).

A failed check raises :class:`CheckFailed`, shown in a notebook as its sentence alone.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..backend import is_simulator
from ..checks import default_tolerance
from ..counting import CannotAttribute, OutOfBounds
from ..counting.record import DATA_INDEX, DataDependentBranch, LinkedCall
from ..ledger import Launch, Ledger, counting_engine, current_engine
from ..sizes import BLOCK_SIZE, _whole_number, blocks_for
from ..validate import kernel_function
from .exercise import Alternative, Exercise, Inputs
from .exercises import EXERCISES
from .running import (
    POISON,
    History,
    Buffers,
    Run,
    bits,
    check_compiled_bounds,
    check_signature,
    fixed_grid,
    is_stub,
    names,
    past_the_end,
    run,
    stub_message,
    unwritten_cause,
    upload,
)
from .verdict import BadArgument, CheckFailed
from .watch import Launched

__all__ = [
    "Alternative",
    "BadArgument",
    "CheckFailed",
    "EXERCISES",
    "Exercise",
    "Grade",
    "array_traffic",
    "check",
    "check_exercise_1",
    "check_exercise_2",
    "check_exercise_3",
    "check_exercise_4",
    "check_exercise_5",
    "check_prediction_2",
    "check_prediction_3",
    "check_prediction_4",
    "check_prediction_5",
    "check_sizes",
    "grade",
]

EXERCISE_1, EXERCISE_2, EXERCISE_3, EXERCISE_4, EXERCISE_5 = (EXERCISES[k] for k in range(1, 6))

SIMULATOR_SIZES = (1, 100, 257, 1000, 4099)
"""Sizes tried in the simulator: one element, less than a block, just past a block, several blocks,
and past a grid written into the code (4 x 256, 8 x 128, 16 x 256 threads: at most 4096)."""
GPU_SIZES = SIMULATOR_SIZES + (65_537, 1_048_579)
"""Sizes tried on a GPU: the simulator's, and two large ones whose blocks cannot all run at once."""
RECOUNT_SIZE = 1000
"""Where the dynamic engine counts the launches the static one cannot follow (a count
does not depend on n; on a GPU that engine runs the kernel in the simulator, slowly)."""
LARGEST_EXTRA_SIZE = 1 << 22
"""The largest size tried past a grid that stayed the same at every size."""


def check_sizes() -> tuple[int, ...]:
    """The sizes a check tries on this backend, smallest first."""
    return SIMULATOR_SIZES if is_simulator() else GPU_SIZES


@dataclass
class Grade:
    """A passed check: what was tried and what the ledger measured at the largest size."""

    exercise: int
    sizes: tuple[int, ...]
    ledger: Ledger
    trips: int
    bytes_per_element: float

    def summary(self) -> str:
        launches = len(self.ledger.launches)
        return (
            f"exercise {self.exercise} passed: right values at every size tried, "
            f"{launches} launch{'es' if launches != 1 else ''}, {self.trips} trips, "
            f"{_num(self.bytes_per_element)} bytes per element"
        )  # the budget stays unsaid: for exercises 2 to 5 it is a graded prediction

    def __repr__(self) -> str:
        return self.summary()


def _num(x: float) -> str:
    return f"{x:g}" if float(x) == int(x) else f"{x:.2f}"


def _typed(x: float) -> str:
    """A predicted number as the student typed it, every digit kept (12.004 is not shown as 12.00; a
    measured number is :func:`_num`'s); a whole float without its ".0"."""
    return str(x).removesuffix(".0")


# The names the tests and older callers know these by.
_Buffers, _upload, _bits, _POISON = Buffers, upload, bits, POISON
_is_stub, _stub_message, _past_the_end, _check_compiled_bounds = is_stub, stub_message, past_the_end, check_compiled_bounds
_names = names


def _run(exercise: Exercise, fn: Callable[..., Any], inputs: Inputs, n: int, name: str | None = None) -> Run:
    return run(exercise, fn, inputs, n, name)


# --- judging what came back --------------------------------------------------------


def _check_guards(exercise: Exercise, buffers: Buffers, n: int) -> None:
    """A write that landed in the guard region after an array (on a GPU nothing stops it)."""
    for name, full in buffers.host.items():
        after = buffers.download(name)
        if np.any(bits(after)[n:] != bits(full)[n:]):
            raise CheckFailed(past_the_end(exercise, n))


def _where(inputs: Inputs, i: int) -> str:
    parts = []
    for name, value in inputs.items():
        shown = value[i] if isinstance(value, np.ndarray) else value
        parts.append(f"{name} = {float(shown):.6g}")
    return ", ".join(parts)


def _tolerance(scale: np.ndarray, dtype: Any) -> np.ndarray:
    # a few rounding errors of the dtype, relative to the size of the terms that were added
    return default_tolerance(dtype) * np.maximum(scale, np.finfo(np.float32).tiny)


def _close(got: np.ndarray, want: np.ndarray, scale: np.ndarray, dtype: Any) -> np.ndarray:
    return np.abs(got.astype(np.float64) - want) <= _tolerance(scale, dtype)


def _explains(got: np.ndarray, mistake: np.ndarray, scale: np.ndarray) -> bool:
    """A known mistake explains these values if it gives all of them, or all but one in ten
    thousand (a GPU may round a few of a million elements across the tolerance)."""
    off = np.count_nonzero(~_close(got, mistake, scale, got.dtype))
    return off <= got.size // 10_000


Unwritten = Callable[[str, np.ndarray], "str | None"]


def _judge(exercise: Exercise, inputs: Inputs, buffers: Buffers, n: int, unwritten: Unwritten | None = None) -> None:
    """Raise :class:`CheckFailed` unless every output holds the right values (``unwritten`` may say
    why elements were never written, from what the run showed)."""
    _check_guards(exercise, buffers, n)
    for name, value in inputs.items():
        if isinstance(value, np.ndarray) and name not in exercise.written:
            after = buffers.download(name)[:n]
            changed = np.flatnonzero(bits(after) != bits(value))
            if changed.size:
                raise CheckFailed(
                    f"your kernel changed the input `{name}` (element {changed[0]} first): "
                    f"`{name}` must only be read"
                )
    expected = exercise.expect(inputs)
    got = {name: buffers.download(name)[:n] for name in exercise.written}
    for name in exercise.written:
        _check_written(exercise, inputs, name, got[name], expected[name], n, unwritten)
    _check_values(exercise, inputs, got, expected, n)


def _missing(exercise: Exercise, inputs: Inputs, name: str, got: np.ndarray,
             expected: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Indices of ``name`` never written (the poison) or, updated in place, never updated."""
    value, scale = expected
    if name in exercise.outputs:
        return np.flatnonzero(bits(got) == POISON[got.dtype.itemsize])
    before = inputs[name]
    # Unchanged where the update should be visible: an update smaller than the
    # tolerance may legitimately round back to the old value (seen on an H200).
    missing = np.flatnonzero((bits(got) == bits(before)) & ~_close(before, value, scale, before.dtype))
    changed = np.setdiff1d(np.arange(got.size), missing)
    if missing.size and not _close(got[changed], value[changed], scale[changed], before.dtype).all():
        # The elements that did change are wrong too: a wrong update, whose step rounds back
        # to the old value here and there (among a million), not a skipped element.
        return missing[:0]
    return missing


def _check_written(exercise: Exercise, inputs: Inputs, name: str, got: np.ndarray,
                   expected: tuple[np.ndarray, np.ndarray], n: int, unwritten: Unwritten | None) -> None:
    missing = _missing(exercise, inputs, name, got, expected)
    if not missing.size:
        return
    cause = unwritten(name, missing) if unwritten is not None else None
    if cause:
        raise CheckFailed(cause)
    duplicates = _duplicate_writes(name, got, expected[0], expected[1], missing)
    if duplicates:
        raise CheckFailed(duplicates)
    what, held = (("was never written", "the poison value") if name in exercise.outputs
                  else ("was never updated", "the value from before the call"))
    i = int(missing[-1]) if missing[-1] == n - 1 else int(missing[0])
    blocks = blocks_for(n)
    raise CheckFailed(
        f"element {i} of `{name}` {what} ({missing.size} of {n} still hold"
        f"{'s' if missing.size == 1 else ''} {held}): check your bounds guard, and that your grid covers every element "
        f"({blocks} block{'s' if blocks > 1 else ''} of {BLOCK_SIZE} threads for n = {n})"
    )


def _check_values(exercise: Exercise, inputs: Inputs, got: dict[str, np.ndarray],
                  expected: dict[str, tuple[np.ndarray, np.ndarray]], n: int) -> None:
    wrong = {}
    for name in exercise.written:
        value, scale = expected[name]
        bad = np.flatnonzero(~_close(got[name], value, scale, got[name].dtype))
        if bad.size:
            wrong[name] = bad
    if not wrong:
        return
    matches = [
        alternative
        for alternative in exercise.alternatives
        if all(_explains(got[name], alt, expected[name][1] + np.abs(alt))
               for name, alt in alternative.outputs(inputs).items())
    ]
    if len(matches) == 1:  # several known mistakes give these values: a larger size will tell
        raise _Diagnosis(matches[0].message)
    name, bad = next(iter(wrong.items()))
    i = int(bad[0])
    value = expected[name][0]
    if exercise.diagnose is not None:
        message = exercise.diagnose(inputs, name, got[name], value, bad)
        if message:
            raise _Diagnosis(message)
    if not np.isfinite(got[name][i]) and np.isfinite(value[i]):
        raise CheckFailed(
            f"element {i} of `{name}` is {got[name][i]}, expected {value[i]:.7g} ({_where(inputs, i)}): "
            "look for a division by zero, or the root or logarithm of a negative number"
        )
    shown = f"element {i} of `{name}` is {got[name][i]:.7g}, expected {value[i]:.7g}"
    right = i // 32 * 32  # whole warps of right values before the first wrong one
    if right >= 32:
        raise _WrongValues(
            f"the first {right} elements of `{name}` are right, but from element {right} on {bad.size} of the "
            f"{n - right} are wrong ({shown}; the inputs there: {_where(inputs, i)}): does a number written into "
            f"your code (a grid of {right} threads, an index limit such as `i < {right}`) stop short of n = {n}? "
            "The grid and the kernel must cover every element up to n"
        )
    raise _WrongValues(
        f"{shown} ({bad.size} of {n} elements are wrong at n = {n}; the inputs there: {_where(inputs, i)})"
    )


def _duplicate_writes(name: str, got: np.ndarray, value: np.ndarray, scale: np.ndarray,
                      missing: np.ndarray, tried: int = 64) -> str | None:
    """When some elements were never written, name the threads that wrote another element instead.

    A written element that holds the result of *another* element (matched by value,
    unambiguously) was written by that element's thread.  If every such match fits
    ``k = j // r``, then threads ``r k ... r k + r - 1`` all wrote element ``k``.
    Read from the values alone, so the message is the same on every backend.
    """
    n = got.size
    written = np.setdiff1d(np.arange(n), missing)
    own = _close(got, value, scale, got.dtype)
    foreign = [int(k) for k in written[~own[written]][:tried]]
    sources: dict[int, int] = {}
    unmatched = 0  # foreign values that are no element's result
    tolerance = _tolerance(scale, got.dtype)
    for k in foreign:
        candidates = np.flatnonzero(np.abs(value - float(got[k])) <= tolerance)
        if candidates.size == 1:
            sources[k] = int(candidates[0])
        unmatched += candidates.size == 0  # several candidates (a ReLU's zeros): no evidence either way
    if not sources or len(sources) < unmatched:
        # Among a million values one may match another element's result by chance: a thread
        # that wrote the wrong element explains more foreign values than it leaves unexplained.
        return None
    for r in (2, 3, 4, 8, 16):
        if all(j // r == k for k, j in sources.items()):
            k = next((k for k in sources if k > 0 and r * k + r <= n), next(iter(sources)))
            threads = [str(t) for t in range(r * k, min(r * k + r, n))]
            listed = threads[0] if len(threads) == 1 else ", ".join(threads[:-1]) + " and " + threads[-1]
            return (
                f"{name}[{k}] was written by threads {listed} (it holds the result of element {sources[k]}), and "
                f"{missing.size} of {n} elements of `{name}` were never written: several threads wrote the same "
                f"element, as `{name}[i // {r}]` does. Each thread must write the element it computed, `{name}[i]`"
            )
    k, j = next(iter(sources.items()))
    return (
        f"{name}[{k}] holds the result of element {j}: the thread for element {j} wrote {name}[{k}] instead of "
        f"{name}[{j}], so some elements were written by more than one thread and {missing.size} of {n} were never "
        f"written. Each thread must write the element it computed, `{name}[i]`"
    )


class _Diagnosis(CheckFailed):
    """Wrong values that a known mistake explains (a larger size may single out another one)."""


class _WrongValues(CheckFailed):
    """Wrong values that no known mistake explains (a larger draw may tell which one it is)."""


# --- the budget --------------------------------------------------------------------


def array_traffic(ledger: Ledger) -> tuple[int, float]:
    """Trips and bytes per element to the n-element arrays of a ledger (one-number results left out)."""
    return _full_traffic(ledger, ledger.elements)


def _traffic(ledger: Ledger, n: int) -> tuple[int, int, int]:
    """Trips, bytes moved and elements written, to the n-element arrays only."""
    ledger.require_counted()
    trips = moved = written = 0
    for launch in ledger.launches:
        full = [a for a in launch.arrays if a.size == n]
        trips += int(any(a.bytes_read for a in full)) + int(any(a.bytes_written for a in full))
        moved += sum(a.bytes_read + a.bytes_written for a in full)
        written += sum(a.bytes_written // a.itemsize for a in full)
    return trips, moved, written


def _full_traffic(ledger: Ledger, n: int) -> tuple[int, float]:
    """Trips and bytes per element to the n-element arrays only."""
    trips, moved, _ = _traffic(ledger, n)
    return trips, moved / n


def _launch_names(launches: Sequence[Launch]) -> str:
    return ", ".join(launch.kernel for launch in launches)


def _uncountable(error: CannotAttribute) -> str:
    """Why the ledger cannot count the kernels, and what to write instead, for each kind of refusal."""
    opening = f"your values are right, but the ledger cannot count the memory traffic of your kernels ({error})"
    if isinstance(error, DataDependentBranch):
        advice = ("a load or a store that runs only for some values (`if v > 0: out[i] = v`) is counted by "
                  "running the kernel, and that count failed too. Compute the value first and store it once, "
                  "whatever it is: `out[i] = max(v, 0.0)`")
    elif DATA_INDEX in str(error):
        advice = ("an index loaded from memory (`x[idx[i]]`), or an atomic operation, hides which elements are "
                  "touched: for these checks every access must be `array[i]`, with i from `cuda.grid(1)` or a "
                  "grid-stride loop")
    elif isinstance(error, LinkedCall):
        advice = "a function linked in from CUDA C cannot be followed: write the whole kernel in Numba"
    else:
        advice = ("for these checks, write kernels whose every access is `array[i]` with i from "
                  "`cuda.grid(1)` or a grid-stride loop, guarded by `if i < out.size`")
    return f"{opening}: {advice}"


Recount = Callable[[], tuple[Ledger, int]]


def _budget(exercise: Exercise, ledger: Ledger, n: int, recount: Recount | None = None) -> tuple[Ledger, int, float]:
    """The trips and bytes per element held to the budget: (the ledger counted, trips, bytes per element).

    ``recount`` runs the function again under the dynamic engine, for launches whose
    compiled code the static engine cannot follow (a store that runs for some values only).
    """
    if not ledger.launches:
        raise CheckFailed(
            f"`{exercise.function}` launched no kernel: the values may be right, but the exercise "
            "is to compute them on the device with your own `@cuda.jit` kernel"
        )
    try:
        trips, moved, written = _traffic(ledger, n)
    except OutOfBounds:
        raise CheckFailed(past_the_end(exercise, n)) from None
    except DataDependentBranch as error:
        if recount is None or current_engine() == "dynamic":
            raise CheckFailed(_uncountable(error)) from None
        return _budget(exercise, *recount())
    except CannotAttribute as error:
        raise CheckFailed(_uncountable(error)) from None
    _hold_to_budget(exercise, ledger, trips, moved / n)
    _require_kernel_writes(exercise, written, n)
    return ledger, trips, moved / n


def _hold_to_budget(exercise: Exercise, ledger: Ledger, trips: int, per_element: float) -> None:
    launches = len(ledger.launches)
    if trips > exercise.trips:
        raise CheckFailed(
            f"you made {trips} trips to memory in {launches} launch{'es' if launches != 1 else ''} "
            f"({_launch_names(ledger.launches)}), more than this computation needs. {exercise.budget_hint}"
        )
    if per_element > exercise.bytes_per_element + 1e-9:
        raise CheckFailed(
            f"your kernel moves {_num(per_element)} bytes per element, more than the result needs. Read only "
            "the arrays the result needs, and write each result once, straight to its output"
        )


def _require_kernel_writes(exercise: Exercise, written: int, n: int) -> None:
    """Every element of every output must have been stored by a kernel (a pass with 0 trips is impossible)."""
    needed = n * len(exercise.written)
    if written < needed:
        raise CheckFailed(
            f"your kernels stored {written} elements into the n-element arrays, but {names(list(exercise.written))} "
            f"hold{'s' if len(exercise.written) == 1 else ''} {needed}: the rest reached them without a kernel "
            "(a copy, or an assignment such as `out[:] = ...`). Compute every element in your kernel and store it "
            "there"
        )


# --- grading ---------------------------------------------------------------------------


def _sizes(sizes: Sequence[int] | None) -> tuple[int, ...]:
    """The sizes to try, smallest first: the backend's, or the caller's, checked."""
    if sizes is None:
        return check_sizes()
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, (Sequence, np.ndarray, set, frozenset)):
        raise BadArgument(f"`sizes` must be a list of element counts such as [1, 100, 1000], got {sizes!r}")
    if len(sizes) == 0:
        raise BadArgument(f"`sizes` is empty: give at least one size, or leave it out to try {check_sizes()}")
    checked = []
    for n in sizes:
        try:
            n = _whole_number("each of `sizes`", n, "elements")
        except TypeError as error:
            raise BadArgument(str(error)) from None
        if n < 1:
            raise BadArgument(f"each of `sizes` must be at least 1 element, got {n}")
        checked.append(n)
    return tuple(sorted(set(checked)))


def _seed(seed: int | None) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise BadArgument(f"`seed` must be a whole number >= 0 (one draw, repeated) or None (fresh inputs), "
                          f"got {seed!r} ({type(seed).__name__})")
    seed = int(seed)
    if seed < 0:
        raise BadArgument(f"`seed` must be a whole number >= 0 (or None for fresh inputs), got {seed}")
    return seed


def _check_function(exercise: Exercise, fn: Callable[..., Any]) -> None:
    """Refuse what is not the student's launching function, or is still the stub."""
    if not callable(fn):
        raise BadArgument(
            f"pass your function itself, e.g. `check_exercise_{exercise.number}({exercise.function})`, "
            f"not {type(fn).__name__}"
        )
    if hasattr(fn, "py_func") or hasattr(fn, "_func") or type(fn).__name__ == "FakeCUDAKernel":
        raise BadArgument(
            f"pass `{exercise.function}`, the Python function that launches your kernel, "
            "not the kernel itself"
        )
    if is_stub(fn):
        raise CheckFailed(stub_message(exercise.function))
    if getattr(fn, "__name__", None) == exercise.unfused:
        raise BadArgument(
            f"`{exercise.unfused}` is the given pipeline: check `{exercise.function}`, your own function"
        )
    check_signature(exercise, fn)


def _past_a_fixed_grid(history: History, largest: int) -> int | None:
    """One size past a grid that stayed the same at every size and covered them all, if there is one."""
    threads = max((launch.threads for launch in fixed_grid(history)), default=0)
    extra = threads + 3  # not a multiple of a block
    return extra if largest < extra <= LARGEST_EXTRA_SIZE else None


def grade(exercise: Exercise, fn: Callable[..., Any], sizes: Sequence[int] | None = None,
          seed: int | None = None) -> Grade:
    """Run ``fn`` on fresh inputs at every size; raise :class:`CheckFailed` or return a :class:`Grade`."""
    _check_function(exercise, fn)
    sizes = _sizes(sizes)
    rng = np.random.default_rng(_seed(seed))
    history: list[tuple[int, list[Launched]]] = []
    tried: list[int] = []
    wrong: CheckFailed | None = None
    pending = list(sizes)
    while pending:
        n = pending.pop(0)
        inputs = exercise.draw(n, rng)
        done = run(exercise, fn, inputs, n)
        history.append((n, done.launched))
        tried.append(n)
        if not pending and (extra := _past_a_fixed_grid(history, n)) is not None:
            pending.append(extra)  # a grid written into the code covered every size: one more, past it
        try:
            _judge(exercise, inputs, done.buffers, n, unwritten_cause(exercise, fn, done, history, n))
        except (_Diagnosis, _WrongValues) as failure:
            # With few elements, several known mistakes can give the same values (one block's
            # maximum is the maximum while there is one block), and a mistake can look like a
            # known one by chance: the largest size that fails, where the most elements tell,
            # is the one reported, explained or not.
            wrong = failure
    if wrong is not None:
        raise CheckFailed(str(wrong)) from None
    ledger, trips, per_element = _budget(exercise, done.ledger, tried[-1], lambda: _recount(exercise, fn, tried[-1], rng))
    if exercise.launches is not None and (problem := exercise.launches(done.launched, tried[-1])):
        raise CheckFailed(problem)
    return Grade(exercise.number, tuple(tried), ledger, trips, per_element)


def _recount(exercise: Exercise, fn: Callable[..., Any], largest: int, rng: np.random.Generator) -> tuple[Ledger, int]:
    """The function run again, its launches counted by running them (the dynamic engine)."""
    n = min(largest, RECOUNT_SIZE)
    with counting_engine("dynamic"):
        inputs = exercise.draw(n, rng)
        done = run(exercise, fn, inputs, n)
        _judge(exercise, inputs, done.buffers, n)
    return done.ledger, n


def check(number: int, fn: Callable[..., Any], *, sizes: Sequence[int] | None = None,
          seed: int | None = None) -> None:
    """Grade exercise ``number`` with the function you wrote; print one line, or raise :class:`CheckFailed`."""
    known = isinstance(number, (int, np.integer)) and not isinstance(number, (bool, np.bool_))
    if not known or number not in EXERCISES:
        raise BadArgument(f"there is no exercise {number!r}; the exercises are {sorted(EXERCISES)}")
    print(grade(EXERCISES[number], fn, sizes, seed).summary())


def check_exercise_1(saxpy_relu: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``saxpy_relu(a, x, y, out)`` must write ``max(a * x + y, 0)`` in 2 trips."""
    return check(1, saxpy_relu, sizes=sizes, seed=seed)


def check_exercise_2(normalize_fused: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``normalize_fused(x, mean, inv_std, gamma, beta, out)``: ``(x - mean) * inv_std * gamma + beta`` in 2 trips."""
    return check(2, normalize_fused, sizes=sizes, seed=seed)


def check_exercise_3(sgd_momentum_step: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``sgd_momentum_step(param, grad, velocity, lr, momentum, weight_decay)`` updates both in place, 2 trips."""
    return check(3, sgd_momentum_step, sizes=sizes, seed=seed)


def check_exercise_4(normalize_by_max: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``normalize_by_max(x, out)`` writes ``x / max(|x|)`` in 3 trips to the n-element arrays, its first pass
    over x shared among blocks (a first launch of one block, where x needs several, fails)."""
    return check(4, normalize_by_max, sizes=sizes, seed=seed)


def check_exercise_5(adamw_step: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)``: param, m, v in place, 2 trips."""
    return check(5, adamw_step, sizes=sizes, seed=seed)


# --- predictions --------------------------------------------------------------------


def _require_numbers(predictions: Mapping[str, Any]) -> None:
    """Each prediction is a finite, non-negative int or float; a trip count is also a whole number."""
    for name, value in predictions.items():
        if (isinstance(value, (bool, np.bool_, complex, np.complexfloating, np.timedelta64, np.datetime64))
                or not isinstance(value, (int, float, np.number))):
            raise CheckFailed(f"`{name}` should be an int or a float (your prediction), got {value!r}")
        if isinstance(value, int) and value.bit_length() > 1024:  # past float's range (str() may refuse it)
            raise CheckFailed(f"`{name}` is larger than any float: a prediction is a number of trips or bytes")
        if not math.isfinite(value):
            raise CheckFailed(f"`{name}` is {value!r}: a prediction is a finite number of trips or bytes")
        if value < 0:
            raise CheckFailed(f"`{name}` is {value!r}: trips and bytes are never negative")
        if name.endswith("trips") and value != int(value):
            raise CheckFailed(f"`{name}` is {value!r}: a trip count is a whole number")


def _off_by(predicted: float, actual: float) -> str:
    """How a wrong prediction is off, without the right number: a graded answer is not given away."""
    return "too few" if predicted < actual else "too many"


def _trips(n: float) -> str:
    return f"{_num(n)} trip" if n == 1 else f"{_num(n)} trips"


def _measure(exercise: Exercise, fn: Callable[..., Any], n: int, name: str) -> tuple[Run, int, float]:
    if not callable(fn):
        raise BadArgument(f"pass the given pipeline, the function `{exercise.unfused}`, not {type(fn).__name__}")
    inputs = exercise.draw(n, np.random.default_rng())
    done = run(exercise, fn, inputs, n, name)
    _judge(exercise, inputs, done.buffers, n)
    trips, per_element = _full_traffic(done.ledger, n)
    return done, trips, per_element


def _numbers_passed(launched: Sequence[Launched]) -> list[str]:
    """The kernels' parameters that received a number rather than an array, by the kernels' own names."""
    found: list[str] = []
    for launch in launched:
        try:
            parameters = list(inspect.signature(kernel_function(launch.kernel)).parameters)
        except (TypeError, ValueError):
            continue
        found += [p for p, a in zip(parameters, launch.args)
                  if isinstance(a, (int, float, np.number)) and not isinstance(a, bool) and p not in found]
    return found


def _problems(problems: Sequence[str]) -> str:
    """Several problems as sentences: each but the last closed by a full stop, unless a question mark closes it."""
    closed = [p if p.endswith(("?", ".")) else f"{p}." for p in problems[:-1]]
    return " ".join(closed + [problems[-1]])


def _require_unfused(exercise: Exercise, fn: Callable[..., Any], ledger: Ledger, trips: int) -> None:
    """The predictions are about the given pipeline: a function within the fused budget is not it."""
    if trips <= exercise.trips:
        launches = len(ledger.launches)
        raise BadArgument(
            f"`{getattr(fn, '__name__', 'the function you passed')}` made {trips} trips in {launches} "
            f"launch{'es' if launches != 1 else ''}, no more than one fused kernel needs: the predictions are "
            f"about the given pipeline, so pass `{exercise.unfused}` itself"
        )


def _check_prediction(exercise: Exercise, unfused: Callable[..., Any], unfused_trips: Any,
                      unfused_bytes_per_element: Any, fused_trips: Any, fused_bytes_per_element: Any) -> Ledger:
    """Compare four predicted numbers with the ledger of the given pipeline and the fused budget."""
    _require_numbers({
        "unfused_trips": unfused_trips,
        "unfused_bytes_per_element": unfused_bytes_per_element,
        "fused_trips": fused_trips,
        "fused_bytes_per_element": fused_bytes_per_element,
    })
    n = RECOUNT_SIZE  # a count does not depend on n; the simulator runs this size in a moment
    done, trips, per_element = _measure(exercise, unfused, n, "unfused")
    ledger = done.ledger
    _require_unfused(exercise, unfused, ledger, trips)
    numbers = _numbers_passed(done.launched)
    launches = len(ledger.launches)
    problems = []
    if unfused_trips != trips:
        problems.append(
            f"{_trips(unfused_trips)} for the given kernels is {_off_by(unfused_trips, trips)}: count as the "
            "ledger does, launch by launch: does it read arrays (one trip), does it write one (another)?"
        )
    if not math.isclose(unfused_bytes_per_element, per_element):
        passed = (f"; {_names(numbers)} {'is a number' if len(numbers) == 1 else 'are numbers'}, passed with "
                  "each launch, and cost nothing") if numbers else ""
        problems.append(
            f"{_typed(unfused_bytes_per_element)} bytes per element for the given kernels is "
            f"{_off_by(unfused_bytes_per_element, per_element)}: count 4 bytes (float32) for every element a kernel "
            f"reads and 4 again for every element it writes (an array updated in place counts both ways){passed}"
        )
    if fused_trips != exercise.trips:
        problems.append(
            f"{_trips(fused_trips)} for one fused kernel is {_off_by(fused_trips, exercise.trips)}: how often must "
            "one kernel go to memory to read its inputs, and how often to write its outputs?"
        )
    if not math.isclose(fused_bytes_per_element, exercise.bytes_per_element):
        problems.append(
            f"{_typed(fused_bytes_per_element)} bytes per element fused is "
            f"{_off_by(fused_bytes_per_element, exercise.bytes_per_element)}: which arrays must one fused kernel "
            "still read from memory, and which write back?"
        )
    if problems:
        raise CheckFailed(_problems(problems))
    print(
        f"your predictions match: {launches} kernels make {trips} trips and move {_num(per_element)} bytes "
        f"per element; fused, {exercise.trips} trips and {_num(exercise.bytes_per_element)} bytes"
    )
    return ledger


def check_prediction_2(normalize_unfused: Callable[..., Any], *, unfused_trips: Any, unfused_bytes_per_element: Any,
                       fused_trips: Any, fused_bytes_per_element: Any) -> Ledger:
    """Compare the predicted trips and bytes with the ledger of the four-kernel pipeline and the fused budget."""
    return _check_prediction(EXERCISE_2, normalize_unfused, unfused_trips, unfused_bytes_per_element,
                             fused_trips, fused_bytes_per_element)


def check_prediction_3(sgd_momentum_step_unfused: Callable[..., Any], *, unfused_trips: Any,
                       unfused_bytes_per_element: Any, fused_trips: Any, fused_bytes_per_element: Any) -> Ledger:
    """Compare the predicted trips and bytes with the ledger of the three SGD kernels and the fused budget."""
    return _check_prediction(EXERCISE_3, sgd_momentum_step_unfused, unfused_trips, unfused_bytes_per_element,
                             fused_trips, fused_bytes_per_element)


def check_prediction_5(adamw_step_unfused: Callable[..., Any], *, unfused_trips: Any, unfused_bytes_per_element: Any,
                       fused_trips: Any, fused_bytes_per_element: Any) -> Ledger:
    """Compare the predicted trips and bytes with the ledger of the given AdamW launches and the fused budget."""
    return _check_prediction(EXERCISE_5, adamw_step_unfused, unfused_trips, unfused_bytes_per_element,
                             fused_trips, fused_bytes_per_element)


def _minimal_trips_problem(trips: float) -> str:
    """Why a predicted minimum other than exercise 4's is wrong, without its number."""
    if trips < 2:
        return (f"{_trips(trips)} is too few: any kernel that computes out from x reads x in one trip and "
                "writes out in another")
    if trips == 2:
        return ("2 trips would mean each thread knows the maximum before it writes out[i]; but the maximum "
                "depends on every element of x, and in an ordinary launch a thread cannot wait for the threads "
                "of every other block: how many times must x be read, then?")
    return (f"{_trips(trips)} is more than needed: no n-element array but x and out has to go through memory; "
            "keep running maxima (one number per block) instead of an array such as |x|")


def check_prediction_4(*, minimal_trips: Any, minimal_bytes_per_element: Any) -> None:
    """Compare the predicted minimal trips and bytes for normalising by the maximum."""
    _require_numbers({"minimal_trips": minimal_trips, "minimal_bytes_per_element": minimal_bytes_per_element})
    problems = [_minimal_trips_problem(minimal_trips)] if minimal_trips != EXERCISE_4.trips else []
    right_bytes = math.isclose(minimal_bytes_per_element, EXERCISE_4.bytes_per_element)
    if not right_bytes and math.isclose(minimal_bytes_per_element, 4 * minimal_trips):
        problems.append(f"{_typed(minimal_bytes_per_element)} bytes per element is right for your "
                        f"{_trips(minimal_trips)}: fix the trips and the bytes follow")
    elif not right_bytes:
        problems.append(
            f"{_typed(minimal_bytes_per_element)} bytes per element does not match your trips: count 4 bytes "
            "(float32) for each trip over an n-element array; the maximum is a single number and "
            "costs next to nothing per element"
        )
    if problems:
        raise CheckFailed(_problems(problems))
    print(
        f"right: {EXERCISE_4.trips} trips and {_num(EXERCISE_4.bytes_per_element)} bytes per element, "
        "against 2 trips and 8 bytes for an elementwise kernel: the reduction is where fusion stops"
    )
