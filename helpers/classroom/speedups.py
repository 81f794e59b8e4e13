"""What fusing buys in each exercise, timed on a GPU: the given unfused pipeline against a fused one.

In a notebook, after the check passes::

    from helpers.classroom import speedups
    speedups.show(1, saxpy_relu, saxpy_relu_unfused)

On a GPU this times your fused function against the given unfused pipeline with
CUDA events (:func:`helpers.timing.time_gpu`) and prints the speedup.  In the
simulator nothing can be timed; it says so and prints the speedup of the
reference solution measured on an H200 (the committed result, with its device and
date).  That committed result is made by::

    python -m helpers.classroom.speedups            # every exercise, n = 2^26, on a GPU
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..backend import is_simulator
from ..counting.ptx import CannotAttribute
from ..ledger import Ledger
from .. import results
from ..sizes import GPU_DEFAULT_SIZE
from ..timing import SIMULATOR_MESSAGE, format_ms, time_gpu
from .exercise import Exercise
from .exercises import EXERCISES
from .reference import reference_functions, reference_module

SIMULATOR_CANNOT_TIME = (
    "The simulator cannot time kernels: it runs every GPU thread as Python code, so a time measured "
    "here would say nothing about a GPU. Run this notebook on a GPU to time your own kernel."
)


@dataclass
class ExerciseTiming:
    """One exercise timed on a GPU: the given unfused pipeline against a fused solution."""

    exercise: int
    title: str
    n: int
    unfused_launches: int | None  # None if the ledger could not count them
    unfused_us: float  # median GPU time of one call, CUDA events
    fused_us: float
    speedup: float  # unfused_us / fused_us
    unfused_bytes_per_element: float | None  # counted by the ledger (None if it could not count)
    fused_bytes_per_element: float | None
    repeats: int
    one_block_fused_us: float | None = None  # exercise 4: the fused version with its maximum in one block

    @property
    def bytes_ratio(self) -> float | None:
        """The speedup the bytes predict (unfused bytes over fused bytes)."""
        if not self.unfused_bytes_per_element or not self.fused_bytes_per_element:
            return None
        return self.unfused_bytes_per_element / self.fused_bytes_per_element


@dataclass(kw_only=True)
class ExerciseSpeedups(results.Record, schema="exercise_speedups", version=1):
    """The reference solutions of every exercise, timed on one GPU."""

    rows: list[ExerciseTiming] = field(default_factory=list)

    def row(self, exercise: int) -> ExerciseTiming | None:
        return next((r for r in self.rows if r.exercise == exercise), None)


def save(record: ExerciseSpeedups, folder: Path | None = None) -> Path:
    """Write the record (with this machine's provenance) under results/<device>/."""
    return results.save(record, folder)


def load(folder: Path | None = None) -> ExerciseSpeedups | None:
    """The committed GPU result, or None when there is none yet (a malformed one is an error)."""
    if not results.path_of(ExerciseSpeedups, folder).exists():
        return None
    return results.load(ExerciseSpeedups, folder)


# --- measuring -------------------------------------------------------------------------


def _device_inputs(exercise: Exercise, n: int) -> list[Any]:
    from numba import cuda

    inputs = exercise.draw(n, np.random.default_rng())
    for name in exercise.outputs:
        inputs[name] = np.zeros(n, np.float32)
    return [cuda.to_device(inputs[a]) if isinstance(inputs[a], np.ndarray) else inputs[a] for a in exercise.args]


COUNT_SIZE = 2**20 + 3  # the ledger counts here: a count per element does not depend on n, and exercise 4's
# one-block maximum loops n / 256 times, past what the static counter follows at the GPU's n


def _bytes_per_element(fn: Callable[..., Any], args: Sequence[Any], n: int) -> tuple[int | None, float | None]:
    """Launches and bytes per element to the n-element arrays, from the ledger (None if it cannot count)."""
    try:
        with Ledger("timed") as ledger:
            fn(*args)
        ledger.require_counted()
        moved = sum(a.bytes_read + a.bytes_written for launch in ledger.launches for a in launch.counted_arrays() if a.size == n)
        return len(ledger.launches), moved / n
    except (CannotAttribute, ValueError, TypeError) as error:
        print(f"(the ledger could not count {getattr(fn, '__name__', 'a pipeline')}: {error})")
        return None, None


def measure(number: int, fused: Callable[..., Any], unfused: Callable[..., Any], n: int = GPU_DEFAULT_SIZE,
            repeats: int = 20) -> ExerciseTiming | None:
    """Time ``unfused`` and ``fused`` for exercise ``number`` at ``n`` elements; None in the simulator."""
    if is_simulator():
        print(SIMULATOR_MESSAGE)
        return None
    exercise = EXERCISES[number]
    counted = min(n, COUNT_SIZE)  # one draw of inputs for both counts
    count_args = _device_inputs(exercise, counted)
    launches, unfused_bytes = _bytes_per_element(unfused, count_args, counted)
    _, fused_bytes = _bytes_per_element(fused, count_args, counted)
    args = _device_inputs(exercise, n)
    times = {}
    for label, fn in (("unfused", unfused), ("fused", fused)):
        timing = time_gpu(lambda: fn(*args), label=label, repeats=repeats)
        times[label] = timing.median_ms * 1e3
    return ExerciseTiming(number, exercise.title, n, launches, times["unfused"], times["fused"],
                          times["unfused"] / times["fused"], unfused_bytes, fused_bytes, repeats)


def measure_references(numbers: Sequence[int], n: int = GPU_DEFAULT_SIZE, repeats: int = 20) -> ExerciseSpeedups:
    """Time every reference solution against its given unfused pipeline."""
    rows = []
    for number in numbers:
        exercise = EXERCISES[number]
        try:
            unfused, fused = reference_functions(number, exercise.unfused, exercise.function)
        except (FileNotFoundError, AttributeError) as error:
            print(f"exercise {number} skipped: {error}")
            continue
        row = measure(number, fused, unfused, n, repeats)
        if row is not None and number == 4:
            row.one_block_fused_us = _one_block(n, repeats)
        if row is not None:
            rows.append(row)
    return ExerciseSpeedups(rows=rows)


def _one_block(n: int, repeats: int) -> float | None:
    """Exercise 4's fused version with its first pass in one block (as the given version has it), in µs.

    Splits the speedup in two: the fusion (|x| never stored) at equal parallelism, and
    the first pass shared among many blocks.
    """
    module = reference_module(4)
    module.MAX_PARTIALS = 1  # one block in the first stage: the second stage reduces one number
    row = measure(4, module.normalize_by_max, module.normalize_unfused, n, repeats)
    return None if row is None else row.fused_us


# --- showing ---------------------------------------------------------------------------


def _size(n: int) -> str:
    k = int(np.log2(n))
    return f"2^{k}" if 2**k == n else f"{n:,}"


def _line(row: ExerciseTiming, whose: str) -> str:
    predicted = f" (the bytes predict {row.bytes_ratio:.2f}x)" if row.bytes_ratio else ""
    given = f"the given {row.unfused_launches}-launch version" if row.unfused_launches else "the given version"
    line = (
        f"{whose}: {format_ms(row.fused_us / 1e3)} fused against {format_ms(row.unfused_us / 1e3)} for {given}, "
        f"at n = {_size(row.n)}: {row.speedup:.2f}x faster{predicted}"
    )
    if row.one_block_fused_us:
        fusion, spread = row.unfused_us / row.one_block_fused_us, row.one_block_fused_us / row.fused_us
        line += (
            f". With its maximum in one block, as the given version has it, the fused version takes "
            f"{format_ms(row.one_block_fused_us / 1e3)}: the fusion alone gives {fusion:.2f}x, and sharing the "
            f"first pass among many blocks the other {spread:.2f}x"
        )
    return line


def committed_line(number: int) -> str:
    """The committed GPU figure of exercise ``number``'s reference solution, labelled with where it was measured."""
    record = load()
    row = record.row(number) if record else None
    if row is None:
        return (
            "No GPU measurement of this exercise is committed yet (`python -m helpers.classroom.speedups` "
            "on a GPU makes one)."
        )
    where = record.provenance.describe() if record.provenance else "a GPU (no provenance recorded)"
    return _line(row, f"The reference solution, measured on {where}")


def show(number: int, fused: Callable[..., Any], unfused: Callable[..., Any], n: int | None = None) -> None:
    """Print the speedup of your fused function over the given unfused one: measured on a GPU, committed otherwise
    (it returns nothing, so a notebook cell shows only the printed lines)."""
    if not callable(fused) or not callable(unfused):
        raise TypeError("pass your fused function and the given unfused one, e.g. `show(1, saxpy_relu, saxpy_relu_unfused)`")
    if isinstance(number, bool) or number not in EXERCISES:
        raise ValueError(f"there is no exercise {number!r}; the exercises are {sorted(EXERCISES)}")
    if is_simulator():
        print(SIMULATOR_CANNOT_TIME)
        print(committed_line(number))
        return None
    row = measure(number, fused, unfused, n or GPU_DEFAULT_SIZE)
    print(_line(row, f"Your kernel, measured now on {results.describe_here()}"))
    print(committed_line(number))


def table(record: ExerciseSpeedups) -> str:
    """The measured speedups as a small text table."""
    lines = [f"{'exercise':<28} {'n':>6} {'unfused':>10} {'fused':>10} {'speedup':>8} {'bytes':>6}"]
    for r in record.rows:
        ratio = f"{r.bytes_ratio:.2f}x" if r.bytes_ratio else "-"
        lines.append(
            f"{str(r.exercise) + ' ' + r.title:<28} {_size(r.n):>6} {format_ms(r.unfused_us / 1e3):>10} "
            f"{format_ms(r.fused_us / 1e3):>10} {r.speedup:>7.2f}x {ratio:>6}"
        )
    return "\n".join(lines)


def _parse_size(text: str) -> int:
    try:
        value = int(text.split("^")[0]) ** int(text.split("^")[1]) if "^" in text else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size is a number of elements like 67108864 or 2^26, not {text!r}") from None
    if value < 1 or value > 2**29:
        raise argparse.ArgumentTypeError(f"a size must be between 1 and 2^29 elements, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.classroom.speedups",
        description="Time every exercise's reference solution against its given unfused pipeline on a GPU, "
        "and write results/<device>/exercise_speedups.json.",
    )
    parser.add_argument("--size", type=_parse_size, default=GPU_DEFAULT_SIZE, help="elements per array (default 2^26)")
    parser.add_argument("--repeats", type=int, default=20, help="timed repeats per pipeline (default 20)")
    parser.add_argument("--exercises", default=",".join(str(k) for k in sorted(EXERCISES)),
                        help="comma-separated exercise numbers (default: all)")
    args = parser.parse_args(argv)
    try:
        numbers = [int(k) for k in args.exercises.split(",") if k.strip()]
    except ValueError:
        parser.error(f"--exercises takes numbers like 1,2,5, not {args.exercises!r}")
    unknown = [k for k in numbers if k not in EXERCISES]
    if unknown:
        parser.error(f"no exercise {unknown[0]}; the exercises are {sorted(EXERCISES)}")
    if is_simulator():
        print(SIMULATOR_CANNOT_TIME)
        return 1
    record = measure_references(numbers, args.size, args.repeats)
    path = save(record)
    print(table(record))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
