"""One check-then-time loop for every lesson that compares implementations over sizes.

An implementation is timed only at a size where it has just given the right answer
(:func:`run_cases`): checked at an odd size first (the bounds guard runs), then at every
size run, poisoned, run again and compared with NumPy on the device before it is timed; one
that fails is dropped with its reason.  The implementations are in :mod:`helpers.harness.peers`.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from numba import cuda
from tqdm import tqdm  # a text bar: tqdm.auto would want ipywidgets in a notebook

from helpers.backend import is_simulator
from helpers.checks import CheckFailed, default_tolerance, random_inputs
from helpers.pipeline import reference

from .device_checks import check_on_device

DTYPE = np.float32
GPU_SIZES = [2**k for k in range(10, 29)]
SIMULATOR_SIZES = [100, 300]
SIMULATOR_MAX_SIZE = 5000  # the simulator runs a few thousand GPU threads per second
MAX_EXPONENT = 40  # 2^40 float32 elements are 4 TiB per array: more than any GPU holds


def default_sizes() -> list[int]:
    return list(SIMULATOR_SIZES if is_simulator() else GPU_SIZES)


@dataclass
class Case:
    """One implementation at one size: what to run, where its answer lands, how to poison it."""

    run: Callable[[], Any]
    output: Callable[[], Any]  # the last run's result: a device array, a CUDA-array-interface object or a host array
    poison: Callable[[], None]
    expected: Any = None  # the right answer on the device; None: the pool's answer at this size
    poisoned: bool = True  # False where the output is a fresh array that could not be filled first
    stream: Any = None  # the cuda.core stream the work runs on; None: the default stream
    close: Callable[[], None] = lambda: None  # what to release once the size is done (a recorded graph)
    same_buffer: Callable[[], bool] | None = None  # for a library's own output: did it land in the poisoned one?


Builder = Callable[[int], Case]


class Pool:
    """Inputs, intermediates and output allocated once at the largest size; size n uses the first n elements.

    The prefixes stay contiguous and aligned for 16-byte loads; inputs and ``s`` are random unless seeded.
    """

    def __init__(self, n_max: int, *, seed: int | None = None, s: float | None = None) -> None:
        self.n_max = n_max
        self.host = random_inputs(n_max, dtype=DTYPE, seed=seed)
        self.s = DTYPE(np.random.default_rng(seed).uniform(1.5, 4.0) if s is None else s)
        self.a, self.b, self.c = (cuda.to_device(x) for x in self.host)
        self.t1, self.t2, self.out, self.expected = (cuda.device_array(n_max, DTYPE) for _ in range(4))

    def views(self, n: int) -> tuple[Any, ...]:  # a, b, c, t1, t2, out
        return tuple(x[:n] for x in (self.a, self.b, self.c, self.t1, self.t2, self.out))

    def load_expected(self, n: int) -> np.ndarray:
        """NumPy's answer at size n, also kept on the device for the comparisons."""
        answer = reference(*(x[:n] for x in self.host), self.s)
        self.expected[:n].copy_to_device(answer)
        return answer


def on_device(got: Any) -> Any:
    """An output as a device array Numba can read: a host array is copied over, CuPy and PyTorch are viewed."""
    if isinstance(got, np.ndarray):
        return cuda.to_device(got)
    return got if hasattr(got, "copy_to_host") else cuda.as_cuda_array(got)  # CuPy, PyTorch: by their interface


def verify(case: Case, label: str, n: int) -> bool:
    """Run, poison, run again, compare with ``case.expected`` on the device (:class:`CheckFailed` if wrong).

    Returns whether the checked output had been poisoned first.
    """
    for step in (case.run, case.poison, case.run):
        step()
        cuda.synchronize()
    got = case.output()
    if case.same_buffer is not None:
        case.poisoned = case.same_buffer()
    check_on_device(on_device(got), case.expected, name=f"{label} at n={n}", rtol=default_tolerance(DTYPE))
    return case.poisoned


@dataclass
class Checked:
    """One check of one implementation, before it was timed."""

    label: str
    n: int
    passed: bool
    poisoned: bool
    error: str | None = None


def reason(error: Exception) -> str:
    """A failure in words: a wrong answer as the check says it, anything else with its type."""
    return str(error) if isinstance(error, CheckFailed) else f"{type(error).__name__}: {error}"


def odd_size(sizes: Sequence[int]) -> int:
    """The largest size if it is not a multiple of 4 (nor so of the block), else n_max - 3."""
    n_max = max(sizes)
    return n_max - 3 if n_max > 3 and n_max % 4 == 0 else n_max


def run_cases(builders: dict[str, Builder], sizes: Sequence[int], *, pool: Pool, report: Callable[[Checked], Any],
              time: Callable[[str, int, Case], Any] | None = None, checkpoint: Callable[[int], Any] | None = None,
              progress: bool = True) -> dict[str, str]:
    """Check every implementation at an odd size, then check and time each at every size.

    ``report`` receives every check, ``time(label, n, case)`` a case that has just passed, ``checkpoint(n)``
    each size done.  ``builders`` loses every implementation that fails; the result says why, by label.
    """
    failed: dict[str, str] = {}

    def checked(label: str, n: int) -> Case | None:
        case = None
        try:
            case = builders[label](n)  # a graph is recorded here: a capture that fails counts as a failure
            if case.expected is None:
                case.expected = pool.expected[:n]
            poisoned = verify(case, label, n)
        except Exception as error:  # a wrong answer, or a peer that breaks at a new size: never timed
            failed[label] = reason(error)
            report(Checked(label, n, False, case.poisoned if case is not None else False, failed[label]))
            del builders[label]
            if case is not None:
                case.close()
            print(f"{label} is wrong at n={n}; it will not be timed: {failed[label]}", file=sys.stderr)
            return None
        report(Checked(label, n, True, poisoned))
        return case

    odd = odd_size(sizes)
    pool.load_expected(odd)
    for label in list(builders):
        if (case := checked(label, odd)) is not None:
            case.close()
    bar = tqdm(total=len(sizes) * len(builders), unit="case", file=sys.stderr, disable=not progress)
    try:
        for n in sorted(sizes):
            pool.load_expected(n)
            for label in list(builders):
                bar.set_postfix_str(f"n={n} {label}")
                if (case := checked(label, n)) is not None:
                    if time is not None:
                        time(label, n, case)
                    case.close()
                bar.update(1)
            if checkpoint is not None:
                checkpoint(n)
    finally:
        bar.close()
    return failed


_POWER = re.compile(r"^2\^(\d+)$")
_RANGE = re.compile(r"^2\^(\d+)\.\.2\^(\d+)(?::(\d+))?$")


def _check_exponent(token: str, exponent: int) -> None:
    if exponent > MAX_EXPONENT:
        raise ValueError(f"size {token!r}: 2^{exponent} elements is far more than any GPU's memory; "
                         f"use exponents up to {MAX_EXPONENT} (2^28 fills an H200 sweep)")


def parse_sizes(text: str) -> list[int]:
    """``"2^10..2^28"`` (every power), ``"2^10..2^28:2"`` (every other), ``"1000,2^20"``: sorted sizes."""
    sizes: set[int] = set()
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        if match := _RANGE.match(token):
            first, last, step = int(match[1]), int(match[2]), int(match[3] or 1)
            if first > last or step < 1:
                raise ValueError(f"size range {token!r}: write 2^LOW..2^HIGH[:STEP] with LOW <= HIGH and STEP >= 1")
            _check_exponent(token, last)
            sizes.update(2**k for k in range(first, last + 1, step))
        elif match := _POWER.match(token):
            _check_exponent(token, int(match[1]))
            sizes.add(2 ** int(match[1]))
        elif token.isdigit():
            sizes.add(int(token))
        else:
            raise ValueError(f"cannot read size {token!r}: use a number (1000), a power (2^20) or a range (2^10..2^28)")
    if not sizes:
        raise ValueError("no sizes given")
    if 0 in sizes:
        raise ValueError("sizes must be positive (n = 0 launches nothing)")
    return sorted(sizes)


def parse_keys(text: str, choices: Sequence[str]) -> list[str]:
    """``"all"``, or comma-separated names from ``choices`` (each once, in the order given)."""
    keys = list(choices) if text.strip() == "all" else [t.strip() for t in text.split(",") if t.strip()]
    unknown = [k for k in keys if k not in choices]
    if unknown or not keys:
        raise ValueError(f"unknown implementation(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(choices)} or 'all'")
    return list(dict.fromkeys(keys))


def check_sizes(sizes: Sequence[int], bytes_per_element: float = 0, extra_bytes: float = 0) -> None:
    """Raise ``ValueError`` for sizes the simulator cannot run, or that need more GPU memory than is free
    (``bytes_per_element`` at the largest size, plus ``extra_bytes``)."""
    if not sizes or min(sizes) < 1:
        raise ValueError("sizes must be positive")
    n_max = max(sizes)
    if is_simulator():
        if n_max > SIMULATOR_MAX_SIZE:
            raise ValueError(f"size {n_max} is too large for the CUDA simulator (it runs a few thousand GPU threads "
                             f"per second); use sizes up to {SIMULATOR_MAX_SIZE}, e.g. --sizes 100,300")
        return
    free, _ = cuda.current_context().get_memory_info()
    needed = bytes_per_element * n_max + extra_bytes
    if needed > free:
        raise ValueError(f"n = {n_max} needs about {needed / 2**30:.1f} GiB of GPU memory, "
                         f"{free / 2**30:.1f} GiB is free: choose smaller --sizes")


def _argument(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    read.__name__ = parse.__name__
    return read


def whole(least: int, name: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``least``, else a usage error naming ``name``."""
    def read(text: str) -> int:
        if not text.strip().lstrip("-").isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"{name} must be >= {least}, got {text!r}")
        return int(text)

    return read


def add_options(parser: argparse.ArgumentParser, choices: Sequence[str], *, repeats: int) -> None:
    """``--sizes``, ``--impl`` and ``--repeats``: the options of every comparison over sizes."""
    parser.add_argument("--sizes", type=_argument(parse_sizes), default=default_sizes(),
                        help="2^10..2^28 (every power; the GPU default), 2^10..2^28:2 (every other), "
                             "or a list such as 1000,2^20 (simulator default: 100,300)")
    parser.add_argument("--impl", type=_argument(lambda text: parse_keys(text, choices)), default=list(choices),
                        help=f"comma-separated, from: {', '.join(choices)}; or 'all'")
    parser.add_argument("--repeats", type=whole(1, "repeats"), default=repeats, help="timed repeats per size and mode")
