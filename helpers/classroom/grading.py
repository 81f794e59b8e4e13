"""Checks for the classroom exercises: right values, every element, *and* the fusion.

Call one from a notebook cell with the function you wrote::

    from helpers.classroom import grading
    grading.check_exercise_1(saxpy_relu)      # or grading.check(1, saxpy_relu)

The exercises themselves are data (:mod:`helpers.classroom.exercises`, one module
each); this module is the engine that grades any of them.

Every call draws fresh random inputs (signed, not uniform: a formula that is only
right for all-equal or all-positive data fails), at sizes that are not a multiple
of the block size and smaller than one block.  Each output is poisoned with a NaN
that carries a recognisable bit pattern, so an element the kernel never wrote is
told apart from one it computed as NaN.  Every array is a view into a larger
buffer whose tail holds a second pattern, a *guard region*:

* in the **simulator** an index past the end raises ``IndexError`` in the thread;
* on a **GPU** nothing stops it, but the compiled code shows the access (the
  ledger follows it for every thread, in the kernels it can follow), and a write
  lands in the guard region.

Each way, the student reads the same words: "a thread indexed past the end of an
array at n = 1 ...: add a bounds guard".

Copies between host and device are watched while the function runs: the inputs
are on the device already, so a result computed with NumPy and copied into ``out``
(directly, or through a device copy kernel) is rejected, whatever kernel is
launched for show.  When elements were never written because several threads
wrote the same one (``out[i // 2]``), the check names those threads, read from the
values, so the message is the same on every backend.

Last, the launches are recorded with :class:`helpers.ledger.Ledger` and the trips
and bytes per element are held to the exercise's budget, so a correct answer that
is not fused still fails: "you made 6 trips ...; the fused kernel needs 2".
Only traffic to the n-element arrays counts; a one-number result (a maximum kept
in a 1-element array) is left out.
"""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from numba import cuda

from ..backend import is_simulator
from ..checks import CheckFailed, default_tolerance
from ..counting import CannotAttribute, OutOfBounds
from ..ledger import Launch, Ledger
from ..sizes import BLOCK_SIZE, blocks_for
from .exercise import Alternative, Exercise, Inputs
from .exercises import EXERCISES
from .watch import HostCopies

__all__ = [
    "Alternative",
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
    "check_prediction_4",
    "check_prediction_5",
    "check_sizes",
    "grade",
]

EXERCISE_1, EXERCISE_2, EXERCISE_3, EXERCISE_4, EXERCISE_5 = (EXERCISES[k] for k in range(1, 6))

SIMULATOR_SIZES = (1, 100, 257, 1000)
"""Sizes tried in the simulator: one element, less than a block, just past a block, several blocks."""
GPU_SIZES = (1, 100, 257, 1000, 65_537, 1_048_579)
"""Sizes tried on a GPU: the simulator's, and two large ones whose blocks cannot all run at once."""
GUARD = 4096
"""Elements of guard region after the end of every array (a launch rounds up by at most 255)."""

_POISON = {4: 0x7FC0DEAD, 8: 0x7FF800000000DEAD}  # quiet NaNs with a payload no arithmetic makes
_CANARY = {4: 0x7FC0CAFE, 8: 0x7FF800000000CAFE}
_UINT = {4: np.uint32, 8: np.uint64}


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
    budget_trips: int
    budget_bytes: float

    def summary(self) -> str:
        launches = len(self.ledger.launches)
        return (
            f"exercise {self.exercise} passed: right values at every size tried, "
            f"{launches} launch{'es' if launches != 1 else ''}, {self.trips} trips, "
            f"{_num(self.bytes_per_element)} bytes per element "
            f"(budget: {self.budget_trips} trips, {_num(self.budget_bytes)} bytes)"
        )

    def __repr__(self) -> str:
        return self.summary()


def _num(x: float) -> str:
    return f"{x:g}" if float(x) == int(x) else f"{x:.2f}"


# --- running the student's function ---------------------------------------------


@dataclass
class _Buffers:
    """Device buffers with guard regions, and the views handed to the student."""

    host: dict[str, np.ndarray] = field(default_factory=dict)  # full buffers as uploaded
    device: dict[str, Any] = field(default_factory=dict)  # full device buffers
    views: dict[str, Any] = field(default_factory=dict)  # first n elements of each

    def download(self, name: str) -> np.ndarray:
        return self.device[name].copy_to_host()


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(_UINT[array.dtype.itemsize])


def _upload(inputs: Inputs, outputs: Sequence[str], n: int) -> _Buffers:
    buffers = _Buffers()
    for name, value in inputs.items():
        if not isinstance(value, np.ndarray):
            continue
        size = value.dtype.itemsize
        full = np.empty(n + GUARD, dtype=value.dtype)
        _bits(full)[n:] = _CANARY[size]
        full[:n] = value
        buffers.host[name] = full
    for name in outputs:
        dtype = np.dtype(np.float32)
        full = np.empty(n + GUARD, dtype=dtype)
        _bits(full)[:n] = _POISON[dtype.itemsize]
        _bits(full)[n:] = _CANARY[dtype.itemsize]
        buffers.host[name] = full
    for name, full in buffers.host.items():
        buffers.device[name] = cuda.to_device(full)
        buffers.views[name] = buffers.device[name][:n]
    return buffers


_SIM_INDEX = re.compile(r"tid=\[(\d+), \d+, \d+\] ctaid=\[(\d+), \d+, \d+\]: index (-?\d+) is out of bounds for axis 0 with size (\d+)")


def _stub_message(function: str) -> str:
    return (
        f"`{function}` is still the exercise stub (it raises NotImplementedError): replace "
        "`# YOUR CODE HERE` and `raise NotImplementedError()` with your code, in the kernel and "
        "in the function that launches it"
    )


def _is_stub(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` or a kernel it refers to still contains ``raise NotImplementedError``."""
    found: list[Any] = [fn]
    try:
        referenced = inspect.getclosurevars(fn)
        found += [v for v in {**referenced.globals, **referenced.nonlocals}.values()]
    except (TypeError, ValueError):
        pass
    for obj in found:
        py = getattr(obj, "py_func", None) or getattr(obj, "fn", None) or obj
        if not inspect.isfunction(py):
            continue
        try:
            source = inspect.getsource(py)
        except (OSError, TypeError):
            continue
        code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
        if re.search(r"\braise\s+NotImplementedError\b", code):
            return True
    return False


def _run(exercise: Exercise, fn: Callable[..., Any], inputs: Inputs, n: int,
         name: str | None = None) -> tuple[_Buffers, Ledger]:
    buffers = _upload(inputs, exercise.outputs, n)
    args = [buffers.views[a] if a in buffers.views else inputs[a] for a in exercise.args]
    ledger = Ledger(name or getattr(fn, "__name__", exercise.function))
    watch = HostCopies({id(view): key for key, view in buffers.views.items()})
    try:
        with watch, ledger:
            fn(*args)
        cuda.synchronize()
    except NotImplementedError:
        raise CheckFailed(_stub_message(exercise.function)) from None
    except IndexError as error:
        if not _SIM_INDEX.search(str(error)):
            raise
        raise CheckFailed(_past_the_end(exercise, n)) from None  # the simulator stopped the thread
    _check_host_copies(exercise, watch, inputs, n)
    _check_compiled_bounds(exercise, ledger, n)
    return buffers, ledger


def _past_the_end(exercise: Exercise, n: int) -> str:
    """The one message for an index past the end, whichever way it was seen (so every backend
    gives the same words): the simulator's IndexError, the compiled code, or the guard region."""
    return (
        f"a thread indexed past the end of an array at n = {n}: a launch rounds the threads up to whole "
        f"blocks, and those with i >= {n} must not touch the arrays. Add a bounds guard, "
        f"`if i < {exercise.written[0]}.size:`, or check the one you have (`<`, not `<=`)"
    )


def _check_compiled_bounds(exercise: Exercise, ledger: Ledger, n: int) -> None:
    """A launch whose compiled code reads or writes past an array's end (on a GPU nothing stops it)."""
    if any(isinstance(launch.refusal, OutOfBounds) for launch in ledger.launches):
        raise CheckFailed(_past_the_end(exercise, n))


def _check_host_copies(exercise: Exercise, watch: HostCopies, inputs: Inputs, n: int) -> None:
    """Reject a result that came from the host: the inputs are on the device already."""
    if n < 2:  # at n = 1 a one-number helper array (a maximum, say) is as large as the problem
        return
    copies = watch.from_host(n)
    if not copies:
        return
    into = [c for c in copies if c.target in exercise.written]
    first = into[0] if into else copies[0]
    copied_back = {c.target for c in watch.to_host(n)}
    read = [a for a in exercise.args if a in copied_back]
    arrays = [a for a in exercise.args if isinstance(inputs.get(a), np.ndarray)]
    if into:
        opening = (
            f"`{first.target}` was written by a copy from the host (`{first.how}`, {first.elements} elements), "
            "not by your kernel"
        )
    else:
        opening = (
            f"`{exercise.written[0]}` was not written by your kernel from the inputs: your function copied "
            f"{first.elements} elements from the host to the device (`{first.how}`), and a kernel only passed "
            "them on"
        )
    first_read = f"; it copied {_names(read)} to the host first: the work was done on the host" if read else ""
    raise CheckFailed(
        f"{opening}{first_read}. The arrays are on the device already: compute the result in your own "
        f"`@cuda.jit` kernel from {_names(arrays)} on the device, with no copy between host and device"
    )


def _names(names: Sequence[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


# --- judging what came back --------------------------------------------------------


def _check_guards(exercise: Exercise, buffers: _Buffers, n: int) -> None:
    """A write that landed in the guard region after an array (on a GPU nothing stops it)."""
    for name, full in buffers.host.items():
        after = buffers.download(name)
        if np.any(_bits(after)[n:] != _bits(full)[n:]):
            raise CheckFailed(_past_the_end(exercise, n))


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


def _judge(exercise: Exercise, inputs: Inputs, buffers: _Buffers, n: int) -> None:
    _check_guards(exercise, buffers, n)
    for name, value in inputs.items():
        if isinstance(value, np.ndarray) and name not in exercise.written:
            after = buffers.download(name)[:n]
            changed = np.flatnonzero(_bits(after) != _bits(value))
            if changed.size:
                raise CheckFailed(
                    f"your kernel changed the input `{name}` (element {changed[0]} first): "
                    f"`{name}` must only be read"
                )
    expected = exercise.expect(inputs)
    got = {name: buffers.download(name)[:n] for name in exercise.written}
    for name in exercise.written:
        value, scale = expected[name]
        if name in exercise.outputs:
            missing = np.flatnonzero(_bits(got[name]) == _POISON[got[name].dtype.itemsize])
            what = "was never written"
            held = "the poison value"
        else:
            before = inputs[name]
            # Unchanged where the update should be visible: an update smaller than the
            # tolerance may legitimately round back to the old value (seen on an H200).
            missing = np.flatnonzero((_bits(got[name]) == _bits(before)) & ~_close(before, value, scale, before.dtype))
            changed = np.setdiff1d(np.arange(n), missing)
            if missing.size and not _close(got[name][changed], value[changed], scale[changed], before.dtype).all():
                # The elements that did change are wrong too: a wrong update, whose step rounds back
                # to the old value here and there (among a million), not a skipped element.
                missing = missing[:0]
            what = "was never updated"
            held = "the value from before the call"
        if missing.size:
            duplicates = _duplicate_writes(name, got[name], value, scale, missing)
            if duplicates:
                raise CheckFailed(duplicates)
            i = int(missing[-1]) if missing[-1] == n - 1 else int(missing[0])
            blocks = blocks_for(n)
            raise CheckFailed(
                f"element {i} of `{name}` {what} ({missing.size} of {n} still hold"
                f"{'s' if missing.size == 1 else ''} {held}): check your bounds guard, and that your grid covers every element "
                f"({blocks} block{'s' if blocks > 1 else ''} of {BLOCK_SIZE} threads for n = {n})"
            )
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
        if all(
            np.all(_close(got[name], alt, expected[name][1] + np.abs(alt), got[name].dtype))
            for name, alt in alternative.outputs(inputs).items()
        )
    ]
    if len(matches) == 1:
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
    raise _WrongValues(
        f"element {i} of `{name}` is {got[name][i]:.7g}, expected {value[i]:.7g} "
        f"({bad.size} of {n} elements are wrong at n = {n}; the inputs there: {_where(inputs, i)})"
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
    tolerance = _tolerance(scale, got.dtype)
    for k in foreign:
        candidates = np.flatnonzero(np.abs(value - float(got[k])) <= tolerance)
        if candidates.size == 1:
            sources[k] = int(candidates[0])
    if not sources or len(sources) < (len(foreign) + 1) // 2:
        # Among a million values one may match another element's result by chance: a thread
        # that wrote the wrong element explains most of the foreign values, not one of them.
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


def array_traffic(ledger: Ledger) -> tuple[int, float]:
    """Trips and bytes per element to the n-element arrays of a ledger (one-number results left out)."""
    return _full_traffic(ledger, ledger.elements)


def _full_traffic(ledger: Ledger, n: int) -> tuple[int, float]:
    """Trips and bytes per element to the n-element arrays only."""
    ledger.require_counted()
    trips = 0
    moved = 0
    for launch in ledger.launches:
        full = [a for a in launch.arrays if a.size == n]
        trips += int(any(a.bytes_read for a in full)) + int(any(a.bytes_written for a in full))
        moved += sum(a.bytes_read + a.bytes_written for a in full)
    return trips, moved / n


def _launch_names(launches: Sequence[Launch]) -> str:
    return ", ".join(launch.kernel for launch in launches)


def _budget(exercise: Exercise, ledger: Ledger, n: int) -> tuple[int, float]:
    if not ledger.launches:
        raise CheckFailed(
            f"`{exercise.function}` launched no kernel: the values may be right, but the exercise "
            "is to compute them on the device with your own `@cuda.jit` kernel"
        )
    try:
        trips, per_element = _full_traffic(ledger, n)
    except OutOfBounds:
        raise CheckFailed(_past_the_end(exercise, n)) from None
    except CannotAttribute as error:
        raise CheckFailed(
            f"your values are right, but the ledger cannot count the memory traffic of your kernels from "
            f"their compiled code ({error}). For these checks, write kernels whose every access is `array[i]` "
            "with i from `cuda.grid(1)` or a grid-stride loop, guarded by `if i < out.size`: no atomics, "
            "no indices loaded from memory"
        ) from None
    launches = len(ledger.launches)
    if trips > exercise.trips:
        raise CheckFailed(
            f"you made {trips} trips to memory in {launches} launch{'es' if launches != 1 else ''} "
            f"({_launch_names(ledger.launches)}); the fused kernel needs {exercise.trips}. "
            f"{exercise.budget_hint}"
        )
    if per_element > exercise.bytes_per_element + 1e-9:
        raise CheckFailed(
            f"your kernel moves {_num(per_element)} bytes per element; "
            f"{_num(exercise.bytes_per_element)} are enough. Read only the arrays the result needs, "
            "and write each result once, straight to its output"
        )
    return trips, per_element


def grade(exercise: Exercise, fn: Callable[..., Any], sizes: Sequence[int] | None = None,
          seed: int | None = None) -> Grade:
    """Run ``fn`` on fresh inputs at every size; raise :class:`CheckFailed` or return a :class:`Grade`."""
    if not callable(fn):
        raise TypeError(
            f"pass your function itself, e.g. `check_exercise_{exercise.number}({exercise.function})`, "
            f"not {type(fn).__name__}"
        )
    if hasattr(fn, "py_func") or hasattr(fn, "_func") or type(fn).__name__ == "FakeCUDAKernel":
        raise TypeError(
            f"pass `{exercise.function}`, the Python function that launches your kernel, "
            "not the kernel itself"
        )
    if _is_stub(fn):
        raise CheckFailed(_stub_message(exercise.function))
    sizes = tuple(sizes or check_sizes())
    rng = np.random.default_rng(seed)
    ledger = Ledger(exercise.function)
    unexplained: _WrongValues | None = None
    diagnosis: _Diagnosis | None = None
    for n in sizes:
        inputs = exercise.draw(n, rng)
        buffers, ledger = _run(exercise, fn, inputs, n)
        try:
            _judge(exercise, inputs, buffers, n)
        except _Diagnosis as failure:
            # With few elements, several known mistakes can give the same values (one
            # block's maximum is the maximum while there is one block): the diagnosis at
            # the largest size, where they differ, is the one reported.
            diagnosis = failure
        except _WrongValues as failure:
            # Likewise: try the larger sizes for a diagnosis before reporting the first failure.
            unexplained = unexplained or failure
    if diagnosis is not None:
        raise CheckFailed(str(diagnosis)) from None
    if unexplained is not None:
        raise CheckFailed(str(unexplained)) from None
    trips, per_element = _budget(exercise, ledger, sizes[-1])
    return Grade(exercise.number, sizes, ledger, trips, per_element, exercise.trips, exercise.bytes_per_element)





def check(number: int, fn: Callable[..., Any], *, sizes: Sequence[int] | None = None,
          seed: int | None = None) -> None:
    """Grade exercise ``number`` with the function you wrote; print one line, or raise :class:`CheckFailed`."""
    if number not in EXERCISES:
        raise ValueError(f"there is no exercise {number!r}; the exercises are {sorted(EXERCISES)}")
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
    """``normalize_by_max(x, out)`` writes ``x / max(|x|)`` in 3 trips to the n-element arrays."""
    return check(4, normalize_by_max, sizes=sizes, seed=seed)


def check_exercise_5(adamw_step: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)``: param, m, v in place, 2 trips."""
    return check(5, adamw_step, sizes=sizes, seed=seed)


# --- predictions --------------------------------------------------------------------


def _require_numbers(predictions: Mapping[str, Any]) -> None:
    for name, value in predictions.items():
        if value is None or value is Ellipsis or not isinstance(value, (int, float, np.number)) or isinstance(value, bool):
            raise CheckFailed(f"`{name}` should be a number (your prediction), got {value!r}")


def _measure(exercise: Exercise, fn: Callable[..., Any], n: int, name: str) -> tuple[Ledger, int, float]:
    inputs = exercise.draw(n, np.random.default_rng())
    buffers, ledger = _run(exercise, fn, inputs, n, name)
    _judge(exercise, inputs, buffers, n)
    trips, per_element = _full_traffic(ledger, n)
    return ledger, trips, per_element


def _check_prediction(exercise: Exercise, unfused: Callable[..., Any], unfused_trips: Any,
                      unfused_bytes_per_element: Any, fused_trips: Any, fused_bytes_per_element: Any) -> Ledger:
    """Compare four predicted numbers with the ledger of the given pipeline and the fused budget."""
    _require_numbers({
        "unfused_trips": unfused_trips,
        "unfused_bytes_per_element": unfused_bytes_per_element,
        "fused_trips": fused_trips,
        "fused_bytes_per_element": fused_bytes_per_element,
    })
    n = check_sizes()[-1]
    ledger, trips, per_element = _measure(exercise, unfused, n, "unfused")
    numbers = [k for k, v in exercise.draw(2, np.random.default_rng(0)).items() if not isinstance(v, np.ndarray)]
    launches = len(ledger.launches)
    problems = []
    if unfused_trips != trips:
        problems.append(
            f"you predicted {unfused_trips} trips for the {launches} kernels; the ledger counted {trips}: "
            "each launch makes one trip to read its inputs and one to write its output"
        )
    if not math.isclose(unfused_bytes_per_element, per_element):
        problems.append(
            f"you predicted {unfused_bytes_per_element} bytes per element for the {launches} kernels; the "
            f"ledger counted {_num(per_element)}: add 4 bytes (float32) for every array element each "
            f"kernel reads or writes; {_names(numbers)} {'is a number' if len(numbers) == 1 else 'are numbers'}, "
            "passed with the launch, and cost nothing"
        )
    if fused_trips != exercise.trips:
        problems.append(
            f"you predicted {fused_trips} trips for one fused kernel; it needs {exercise.trips}: one to "
            "read its inputs, one to write its outputs"
        )
    if not math.isclose(fused_bytes_per_element, exercise.bytes_per_element):
        problems.append(
            f"you predicted {fused_bytes_per_element} bytes per element fused; which arrays must still be "
            "read from memory, and which written, once the intermediates stay in registers?"
        )
    if problems:
        raise CheckFailed("; ".join(problems))
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


def check_prediction_5(adamw_step_unfused: Callable[..., Any], *, unfused_trips: Any, unfused_bytes_per_element: Any,
                       fused_trips: Any, fused_bytes_per_element: Any) -> Ledger:
    """Compare the predicted trips and bytes with the ledger of the given AdamW launches and the fused budget."""
    return _check_prediction(EXERCISE_5, adamw_step_unfused, unfused_trips, unfused_bytes_per_element,
                             fused_trips, fused_bytes_per_element)


def check_prediction_4(*, minimal_trips: Any, minimal_bytes_per_element: Any) -> None:
    """Compare the predicted minimal trips and bytes for normalising by the maximum."""
    _require_numbers({"minimal_trips": minimal_trips, "minimal_bytes_per_element": minimal_bytes_per_element})
    problems = []
    if minimal_trips < EXERCISE_4.trips:
        problems.append(
            f"{minimal_trips} trips would mean each thread knows the maximum before it writes out[i]; "
            "but the maximum depends on every element of x, and in an ordinary launch a thread cannot "
            "wait for the threads of every other block: x has to be read a second time"
        )
    elif minimal_trips > EXERCISE_4.trips:
        problems.append(
            f"{minimal_trips} trips is more than needed: finding the maximum does not need an array of "
            "|x| in memory; keep a running maximum (one number) instead"
        )
    if not math.isclose(minimal_bytes_per_element, EXERCISE_4.bytes_per_element):
        problems.append(
            f"{minimal_bytes_per_element} bytes per element does not match your trips: count 4 bytes "
            "(float32) for each trip over an n-element array; the maximum is a single number and "
            "costs next to nothing per element"
        )
    if problems:
        raise CheckFailed("; ".join(problems))
    print(
        f"right: {EXERCISE_4.trips} trips and {_num(EXERCISE_4.bytes_per_element)} bytes per element, "
        "against 2 trips and 8 bytes for an elementwise kernel: the reduction is where fusion stops"
    )
