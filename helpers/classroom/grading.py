"""Checks for the classroom exercises: right values, every element, *and* the fusion.

Call one from a notebook cell with the function you wrote::

    from helpers.classroom import grading
    grading.check_exercise_1(saxpy_relu)

Every call draws fresh random inputs (signed, not uniform: a formula that is only
right for all-equal or all-positive data fails), at sizes that are not a multiple
of the block size and smaller than one block.  Each output is poisoned with a NaN
that carries a recognisable bit pattern, so an element the kernel never wrote is
told apart from one it computed as NaN.  Every array is a view into a larger
buffer whose tail holds a second pattern, a *guard region*:

* in the **simulator** an index past the end raises ``IndexError`` in the thread,
  which is turned into "thread ... indexed past the end: add a bounds guard";
* on a **GPU** nothing stops the write, but it lands in the guard region and the
  check reports it.  (A *read* past the end is harmless there and goes unseen.)

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
from ..counting.ptx import CannotAttribute
from ..ledger import Launch, Ledger
from ..sizes import BLOCK_SIZE, blocks_for

__all__ = [
    "CheckFailed",
    "Grade",
    "check_exercise_1",
    "check_exercise_2",
    "check_exercise_3",
    "check_exercise_4",
    "check_prediction_2",
    "check_prediction_4",
    "grade",
    "array_traffic",
    "check_sizes",
    "EXERCISES",
]

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


# --- what an exercise is ----------------------------------------------------------

Inputs = dict[str, Any]
Expected = dict[str, tuple[np.ndarray, np.ndarray]]  # output name -> (values, error scale)


@dataclass(frozen=True)
class Alternative:
    """A known mistake: the outputs it would give, and what to tell the student."""

    outputs: Callable[[Inputs], dict[str, np.ndarray]]
    message: str


@dataclass(frozen=True)
class Exercise:
    """Everything a check needs to grade one exercise."""

    number: int
    function: str  # the student's function, as the notebook names it
    args: tuple[str, ...]  # its arguments, in order
    outputs: tuple[str, ...]  # fresh arrays the function must fill (poisoned)
    in_place: tuple[str, ...]  # arrays the function must update in place
    draw: Callable[[int, np.random.Generator], Inputs]
    expect: Callable[[Inputs], Expected]
    trips: int  # budget: trips to the n-element arrays
    bytes_per_element: float  # budget: bytes moved per element (float32)
    budget_hint: str  # how to meet the budget, in a sentence
    alternatives: tuple[Alternative, ...] = ()
    diagnose: Callable[[Inputs, str, np.ndarray, np.ndarray, np.ndarray], str | None] | None = None

    @property
    def written(self) -> tuple[str, ...]:
        return self.outputs + self.in_place


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
    try:
        with ledger:
            fn(*args)
        cuda.synchronize()
    except NotImplementedError:
        raise CheckFailed(_stub_message(exercise.function)) from None
    except IndexError as error:
        match = _SIM_INDEX.search(str(error))
        if not match:
            raise
        thread, block, index, size = (int(g) for g in match.groups())
        raise CheckFailed(
            f"thread {thread} of block {block} (i = {block * BLOCK_SIZE + thread} for blocks of "
            f"{BLOCK_SIZE}) indexed past the end: element {index} of a {size}-element array "
            f"(the last is {size - 1}). Add a bounds guard, `if i < out.size:`, or check the one "
            "you have (`<`, not `<=`)"
        ) from None
    return buffers, ledger


# --- judging what came back --------------------------------------------------------


def _check_guards(buffers: _Buffers, n: int) -> None:
    for name, full in buffers.host.items():
        after = buffers.download(name)
        changed = np.flatnonzero(_bits(after)[n:] != _bits(full)[n:])
        if changed.size:
            k = int(changed[0])
            raise CheckFailed(
                f"your kernel wrote past the end of `{name}`: element {n + k} of an array of {n} "
                f"elements changed ({changed.size} past the end in all). A thread with i >= {n} ran "
                f"without a bounds guard: add `if i < {name}.size:` (on a GPU nothing stops such a "
                "write; it lands on whatever lies beyond the array)"
            )


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
    _check_guards(buffers, n)
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
            what = "was never updated"
            held = "the value from before the call"
        if missing.size:
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
        raise CheckFailed(matches[0].message)
    name, bad = next(iter(wrong.items()))
    i = int(bad[0])
    value = expected[name][0]
    if exercise.diagnose is not None:
        message = exercise.diagnose(inputs, name, got[name], value, bad)
        if message:
            raise CheckFailed(message)
    if not np.isfinite(got[name][i]) and np.isfinite(value[i]):
        raise CheckFailed(
            f"element {i} of `{name}` is {got[name][i]}, expected {value[i]:.7g} ({_where(inputs, i)}): "
            "look for a division by zero, or the root or logarithm of a negative number"
        )
    raise _WrongValues(
        f"element {i} of `{name}` is {got[name][i]:.7g}, expected {value[i]:.7g} "
        f"({bad.size} of {n} elements are wrong at n = {n}; the inputs there: {_where(inputs, i)})"
    )


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
    for n in sizes:
        inputs = exercise.draw(n, rng)
        buffers, ledger = _run(exercise, fn, inputs, n)
        try:
            _judge(exercise, inputs, buffers, n)
        except _WrongValues as failure:
            # With few elements, several known mistakes can give the same values: try
            # the larger sizes for a diagnosis before reporting the first failure.
            unexplained = unexplained or failure
    if unexplained is not None:
        raise CheckFailed(str(unexplained)) from None
    trips, per_element = _budget(exercise, ledger, sizes[-1])
    return Grade(exercise.number, sizes, ledger, trips, per_element, exercise.trips, exercise.bytes_per_element)


def _signed(rng: np.random.Generator, n: int, spread: float = 1.0) -> np.ndarray:
    """Normal values, about half of them negative, in float32."""
    return rng.normal(0.0, spread, n).astype(np.float32)


def _scalar(rng: np.random.Generator, low: float, high: float) -> np.float32:
    return np.float32(rng.uniform(low, high))


def _f64(x: Any) -> Any:
    return np.asarray(x, dtype=np.float64) if isinstance(x, np.ndarray) else float(x)


# --- exercise 1: SAXPY then ReLU --------------------------------------------------


def _draw_1(n: int, rng: np.random.Generator) -> Inputs:
    a = np.float32(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0))
    return {"a": a, "x": _signed(rng, n), "y": _signed(rng, n)}


def _expect_1(v: Inputs) -> Expected:
    a, x, y = _f64(v["a"]), _f64(v["x"]), _f64(v["y"])
    return {"out": (np.maximum(a * x + y, 0.0), np.abs(a * x) + np.abs(y))}


def _alt(fn: Callable[[Inputs], np.ndarray], name: str = "out") -> Callable[[Inputs], dict[str, np.ndarray]]:
    return lambda v: {name: fn({k: _f64(x) for k, x in v.items()})}


EXERCISE_1 = Exercise(
    number=1,
    function="saxpy_relu",
    args=("a", "x", "y", "out"),
    outputs=("out",),
    in_place=(),
    draw=_draw_1,
    expect=_expect_1,
    trips=2,
    bytes_per_element=12,
    budget_hint="Do the scaling, the addition and the ReLU in one kernel: read x and y once, "
    "keep a * x and a * x + y in registers, write out once.",
    alternatives=(
        Alternative(
            _alt(lambda v: v["a"] * v["x"] + v["y"]),
            "your values are right where a * x + y is positive but not where it is negative: "
            "apply the ReLU, `max(a * x[i] + y[i], 0)`",
        ),
        Alternative(
            _alt(lambda v: np.maximum(v["a"] * v["x"], 0.0) + v["y"]),
            "you applied the ReLU before adding y (max(a * x, 0) + y): add first, then take "
            "`max(..., 0)` of the sum",
        ),
        Alternative(
            _alt(lambda v: np.maximum(v["a"] * v["y"] + v["x"], 0.0)),
            "your result matches max(a * y + x, 0): x and y are swapped (a check with equal x and "
            "y would not have noticed)",
        ),
    ),
)


# --- exercise 2: the elementwise tail of a layer norm ------------------------------


def _draw_2(n: int, rng: np.random.Generator) -> Inputs:
    return {
        "x": (rng.normal(0.3, 2.0, n)).astype(np.float32),
        "mean": _scalar(rng, -0.5, 0.5),
        "inv_std": _scalar(rng, 0.4, 1.5),
        "gamma": rng.uniform(0.5, 1.5, n).astype(np.float32) * rng.choice([-1, 1], n).astype(np.float32),
        "beta": _signed(rng, n, 0.5),
    }


def _expect_2(v: Inputs) -> Expected:
    x, m, s, g, b = (_f64(v[k]) for k in ("x", "mean", "inv_std", "gamma", "beta"))
    scale = (np.abs(x) + abs(m)) * s * np.abs(g) + np.abs(b)
    return {"out": ((x - m) * s * g + b, scale)}


EXERCISE_2 = Exercise(
    number=2,
    function="normalize_fused",
    args=("x", "mean", "inv_std", "gamma", "beta", "out"),
    outputs=("out",),
    in_place=(),
    draw=_draw_2,
    expect=_expect_2,
    trips=2,
    bytes_per_element=16,
    budget_hint="All four operations belong in one kernel: read x, gamma and beta once and write "
    "out once; mean and inv_std are scalars and cost no trip.",
    alternatives=(
        Alternative(
            _alt(lambda v: ((v["x"] - v["mean"]) * v["inv_std"] + v["beta"]) * v["gamma"]),
            "you added beta before multiplying by gamma: the order is subtract the mean, "
            "multiply by inv_std, multiply by gamma, then add beta",
        ),
        Alternative(
            _alt(lambda v: (v["x"] - v["mean"] * v["inv_std"]) * v["gamma"] + v["beta"]),
            "your result matches (x - mean * inv_std) * gamma + beta: multiplication binds tighter "
            "than subtraction, so write `(x[i] - mean) * inv_std`",
        ),
        Alternative(
            _alt(lambda v: (v["x"] - v["mean"]) * v["inv_std"] * v["gamma"][0] + v["beta"][0]),
            "gamma and beta hold one value per element: read gamma[i] and beta[i], not gamma[0] and "
            "beta[0] (a freshly initialised layer, gamma all ones and beta all zeros, would hide this)",
        ),
    ),
)


# --- exercise 3: SGD with momentum and weight decay ---------------------------------


def _draw_3(n: int, rng: np.random.Generator) -> Inputs:
    return {
        "param": _signed(rng, n),
        "grad": _signed(rng, n),
        "velocity": _signed(rng, n, 0.5),
        "lr": _scalar(rng, 0.05, 0.5),
        "momentum": _scalar(rng, 0.5, 0.95),
        "weight_decay": _scalar(rng, 0.02, 0.2),
    }


def _sgd(p: Any, g: Any, v: Any, lr: float, mu: float, wd: float) -> tuple[Any, Any]:
    velocity = mu * v + (g + wd * p)
    return p - lr * velocity, velocity


def _step(p: Any, lr: float, velocity: Any) -> tuple[Any, Any]:
    """A step with a given new velocity: (new param, new velocity)."""
    return p - lr * velocity, velocity


def _expect_3(v: Inputs) -> Expected:
    p, g, vel, lr, mu, wd = (_f64(v[k]) for k in ("param", "grad", "velocity", "lr", "momentum", "weight_decay"))
    new_p, new_v = _sgd(p, g, vel, lr, mu, wd)
    v_scale = np.abs(mu * vel) + np.abs(g) + np.abs(wd * p)
    return {"param": (new_p, np.abs(p) + lr * v_scale), "velocity": (new_v, v_scale)}


def _alt_3(update: Callable[..., tuple[Any, Any]]) -> Callable[[Inputs], dict[str, np.ndarray]]:
    def outputs(v: Inputs) -> dict[str, np.ndarray]:
        p, g, vel, lr, mu, wd = (_f64(v[k]) for k in ("param", "grad", "velocity", "lr", "momentum", "weight_decay"))
        new_p, new_v = update(p, g, vel, lr, mu, wd)
        return {"param": new_p, "velocity": new_v}

    return outputs


EXERCISE_3 = Exercise(
    number=3,
    function="sgd_momentum_step",
    args=("param", "grad", "velocity", "lr", "momentum", "weight_decay"),
    outputs=(),
    in_place=("param", "velocity"),
    draw=_draw_3,
    expect=_expect_3,
    trips=2,
    bytes_per_element=20,
    budget_hint="One kernel can do the whole step: read param, grad and velocity once, compute the "
    "new velocity and the new param in registers, write both once.",
    alternatives=(
        Alternative(
            _alt_3(lambda p, g, v, lr, mu, wd: (p - lr * v, mu * v + g + wd * p)),
            "your `param` was updated with the velocity from before this step: compute the new "
            "velocity first, then use it in `param - lr * velocity`",
        ),
        Alternative(
            _alt_3(lambda p, g, v, lr, mu, wd: _step(p, lr, mu * v + g + wd * g)),
            "weight decay scales the parameter, not the gradient: add `weight_decay * param[i]` to "
            "the gradient (with param equal to grad, as in a uniform test, you could not tell)",
        ),
        Alternative(
            _alt_3(lambda p, g, v, lr, mu, wd: _step(p, lr, mu * v + g)),
            "your step has no weight decay: the gradient is `grad[i] + weight_decay * param[i]`",
        ),
        Alternative(
            _alt_3(lambda p, g, v, lr, mu, wd: _step(p, -lr, mu * v + g + wd * p)),
            "you moved `param` uphill: subtract `lr * velocity`, do not add it",
        ),
    ),
)


# --- exercise 4: normalise by the largest magnitude ----------------------------------


def _draw_4(n: int, rng: np.random.Generator) -> Inputs:
    x = _signed(rng, n)
    if n > 1:
        # The largest magnitude sits in the last element, and is negative: a kernel that
        # divides before the maximum is complete, that takes a maximum per block, or that
        # forgets the absolute value, gets most elements wrong.
        x[-1] = -np.float32(np.abs(x).max() * rng.uniform(1.5, 3.0))
    return {"x": x}


def _expect_4(v: Inputs) -> Expected:
    x = _f64(v["x"])
    m = np.abs(x).max()
    return {"out": (x / m, np.abs(x / m))}


def _diagnose_4(v: Inputs, name: str, got: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str | None:
    m = float(np.abs(_f64(v["x"])).max())
    g, w = got[bad].astype(np.float64), want[bad]
    if np.all(np.isinf(g)):
        i = int(bad[0])
        return (
            f"element {i} of `out` is {got[i]}, expected {want[i]:.7g}: x was divided by zero on "
            f"{bad.size} of {got.size} elements, so the maximum was still 0 when the division ran. "
            "Does your first pass run before the division, and does every element, the last one "
            "included, take part in it?"
        )
    if np.all(np.isfinite(g)) and np.all(np.sign(g) == np.sign(w)) and np.all(np.abs(g) > np.abs(w)):
        i = int(bad[0])
        return (
            f"element {i} of `out` is {got[i]:.7g}, expected {want[i]:.7g}: it was divided by about "
            f"{abs(float(v['x'][i]) / float(got[i])):.6g}, less than the largest |x| ({m:.6g}), on "
            f"{bad.size} of {got.size} elements. Either some element never took part in the maximum (check "
            "the loop and the guard of your first pass), or a block divided by the maximum of its own "
            "elements, or before the maximum was complete: the maximum needs every element, blocks "
            "cannot wait for each other, so find it in one launch and divide in the next"
        )
    return None


EXERCISE_4 = Exercise(
    number=4,
    function="normalize_by_max",
    args=("x", "out"),
    outputs=("out",),
    in_place=(),
    draw=_draw_4,
    expect=_expect_4,
    trips=3,
    bytes_per_element=12,
    budget_hint="Two passes are enough: the first reads x and keeps only the running maximum (one "
    "number, not an array of |x|), the second reads x again and writes out.",
    alternatives=(
        Alternative(
            _alt(lambda v: v["x"] / np.max(v["x"])),
            "your result matches x / max(x): normalise by the largest magnitude, max(|x|), so that "
            "a large negative value counts (take `abs(x[i])` before the maximum)",
        ),
    ),
    diagnose=_diagnose_4,
)

EXERCISES = {1: EXERCISE_1, 2: EXERCISE_2, 3: EXERCISE_3, 4: EXERCISE_4}


def _check(number: int, fn: Callable[..., Any], sizes: Sequence[int] | None, seed: int | None) -> None:
    print(grade(EXERCISES[number], fn, sizes, seed).summary())


def check_exercise_1(saxpy_relu: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``saxpy_relu(a, x, y, out)`` must write ``max(a * x + y, 0)`` in 2 trips."""
    return _check(1, saxpy_relu, sizes, seed)


def check_exercise_2(normalize_fused: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``normalize_fused(x, mean, inv_std, gamma, beta, out)``: ``(x - mean) * inv_std * gamma + beta`` in 2 trips."""
    return _check(2, normalize_fused, sizes, seed)


def check_exercise_3(sgd_momentum_step: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``sgd_momentum_step(param, grad, velocity, lr, momentum, weight_decay)`` updates both in place, 2 trips."""
    return _check(3, sgd_momentum_step, sizes, seed)


def check_exercise_4(normalize_by_max: Callable[..., Any], *, sizes: Sequence[int] | None = None,
                     seed: int | None = None) -> None:
    """``normalize_by_max(x, out)`` writes ``x / max(|x|)`` in 3 trips to the n-element arrays."""
    return _check(4, normalize_by_max, sizes, seed)


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


def check_prediction_2(normalize_unfused: Callable[..., Any], *, unfused_trips: Any, unfused_bytes_per_element: Any,
                       fused_trips: Any, fused_bytes_per_element: Any) -> Ledger:
    """Compare the predicted trips and bytes with the ledger of the four-kernel pipeline and the fused budget."""
    _require_numbers({
        "unfused_trips": unfused_trips,
        "unfused_bytes_per_element": unfused_bytes_per_element,
        "fused_trips": fused_trips,
        "fused_bytes_per_element": fused_bytes_per_element,
    })
    ledger, trips, per_element = _measure(EXERCISE_2, normalize_unfused, check_sizes()[-1], "unfused")
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
            "kernel reads or writes; mean and inv_std are scalars, passed with the launch, and cost nothing"
        )
    if fused_trips != EXERCISE_2.trips:
        problems.append(
            f"you predicted {fused_trips} trips for one fused kernel; it needs {EXERCISE_2.trips}: one to "
            "read its inputs, one to write its output"
        )
    if not math.isclose(fused_bytes_per_element, EXERCISE_2.bytes_per_element):
        problems.append(
            f"you predicted {fused_bytes_per_element} bytes per element fused; which arrays must still be "
            "read from memory, and which written, once the intermediates stay in registers?"
        )
    if problems:
        raise CheckFailed("; ".join(problems))
    print(
        f"your predictions match: {launches} kernels make {trips} trips and move {_num(per_element)} bytes "
        f"per element; fused, {EXERCISE_2.trips} trips and {_num(EXERCISE_2.bytes_per_element)} bytes"
    )
    return ledger


def check_prediction_4(*, minimal_trips: Any, minimal_bytes_per_element: Any) -> None:
    """Compare the predicted minimal trips and bytes for normalising by the maximum."""
    _require_numbers({"minimal_trips": minimal_trips, "minimal_bytes_per_element": minimal_bytes_per_element})
    problems = []
    if minimal_trips < EXERCISE_4.trips:
        problems.append(
            f"{minimal_trips} trips would mean each thread knows the maximum before it writes out[i]; "
            "but the maximum depends on every element of x, and a thread cannot wait for the threads "
            "of every other block: x has to be read a second time"
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
