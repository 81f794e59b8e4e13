"""Running a student's function once, the way every check does, and what can be told from that run alone.

Each run gets fresh device buffers: every array is a view into a larger buffer whose
tail holds a recognisable pattern (a *guard region*), and every output is poisoned with
a NaN that carries its own bit pattern, so an element the kernel never wrote is told
apart from one it computed as NaN.  While the function runs, the launches are recorded
by a :class:`helpers.ledger.Ledger` and watched (:mod:`.watch`): the copies it makes, and
the kernels it launches.  Before the values are judged, the run is refused when:

* the function is still the exercise's stub, or has the wrong signature;
* a kernel does not compile for a GPU (checked in the simulator too, :mod:`.compiled`);
* a thread indexed past the end of an array (the simulator's ``IndexError``, or the
  compiled code followed by the ledger);
* a result reached an output by a copy rather than from a kernel: from the host, or
  from another device array (those copies are trips the ledger of the kernels does not
  show).
"""

from __future__ import annotations

import dis
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from numba import cuda
from numba.core import errors as numba_errors

from ..backend import is_simulator
from ..counting import OutOfBounds
from ..ledger import HostArrayRefused, Ledger
from ..sizes import blocks_for
from .compiled import compile_failure, compiler_message
from .exercise import STUB, Exercise, Inputs
from .verdict import CheckFailed
from .watch import Copies, Copy, Launched, Launches

GUARD = 4096
"""Elements of guard region after the end of every array (a launch rounds up by at most 255)."""

POISON = {4: 0x7FC0DEAD, 8: 0x7FF800000000DEAD}  # quiet NaNs with a payload no arithmetic makes
CANARY = {4: 0x7FC0CAFE, 8: 0x7FF800000000CAFE}
_UINT = {4: np.uint32, 8: np.uint64}


@dataclass
class Buffers:
    """Device buffers with guard regions, and the views handed to the student."""

    host: dict[str, np.ndarray] = field(default_factory=dict)  # full buffers as uploaded
    device: dict[str, Any] = field(default_factory=dict)  # full device buffers
    views: dict[str, Any] = field(default_factory=dict)  # first n elements of each

    def download(self, name: str) -> np.ndarray:
        return self.device[name].copy_to_host()


def bits(array: np.ndarray) -> np.ndarray:
    """The array's bits, as unsigned integers of its item size (to tell NaN payloads apart)."""
    return array.view(_UINT[array.dtype.itemsize])


def upload(inputs: Inputs, outputs: Sequence[str], n: int) -> Buffers:
    """Device buffers for one run: the inputs, and the outputs poisoned, each followed by a guard region."""
    buffers = Buffers()
    for name, value in inputs.items():
        if not isinstance(value, np.ndarray):
            continue
        size = value.dtype.itemsize
        full = np.empty(n + GUARD, dtype=value.dtype)
        bits(full)[n:] = CANARY[size]
        full[:n] = value
        buffers.host[name] = full
    for name in outputs:
        dtype = np.dtype(np.float32)
        full = np.empty(n + GUARD, dtype=dtype)
        bits(full)[:n] = POISON[dtype.itemsize]
        bits(full)[n:] = CANARY[dtype.itemsize]
        buffers.host[name] = full
    for name, full in buffers.host.items():
        buffers.device[name] = cuda.to_device(full)
        buffers.views[name] = buffers.device[name][:n]
    return buffers


# --- before running: the stub and the signature ---------------------------------------


def stub_message(function: str) -> str:
    return (
        f"`{function}` is still the exercise stub (it raises NotImplementedError): replace "
        f"`{STUB[0]}` and `{STUB[1]}` with your code, in the kernel and in the function that launches it"
    )


def _functions_of(fn: Callable[..., Any]) -> list[Any]:
    """``fn`` and the functions and kernels it refers to by name."""
    found: list[Any] = [fn]
    try:
        referenced = inspect.getclosurevars(fn)
        found += list({**referenced.globals, **referenced.nonlocals}.values())
    except (TypeError, ValueError):
        pass
    return [py for obj in found if inspect.isfunction(py := getattr(obj, "py_func", None) or getattr(obj, "fn", None) or obj)]


def is_stub(fn: Callable[..., Any]) -> bool:
    """True when ``fn``, or a function or kernel it refers to, still holds the stub's two lines.

    Only the stub as released counts (``# YOUR CODE HERE`` above a bare
    ``raise NotImplementedError()``): a solution may raise ``NotImplementedError("...")``
    for what it does not support.
    """
    for py in _functions_of(fn):
        try:
            lines = [line.strip() for line in inspect.getsource(py).splitlines()]
        except (OSError, TypeError):
            continue
        if any(lines[k : k + 2] == list(STUB) for k in range(len(lines) - 1)):
            return True
    return False


def check_signature(exercise: Exercise, fn: Callable[..., Any]) -> None:
    """Refuse a function that cannot be called with the exercise's arguments, naming them."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a built-in or an object without one: the call will tell
        return
    try:
        signature.bind(*exercise.args)
    except TypeError:
        raise CheckFailed(
            f"`{exercise.function}` must take the {len(exercise.args)} arguments "
            f"`{exercise.function}({', '.join(exercise.args)})`, in this order; yours takes {signature}"
        ) from None


# --- running --------------------------------------------------------------------------


@dataclass
class Run:
    """One run of the student's function: its buffers, what the ledger and the watch saw, what it returned."""

    buffers: Buffers
    ledger: Ledger
    launched: list[Launched]
    returned: Any


_SIM_INDEX = re.compile(r"tid=\[(\d+), \d+, \d+\] ctaid=\[(\d+), \d+, \d+\]: index (-?\d+) is out of bounds")


def run(exercise: Exercise, fn: Callable[..., Any], inputs: Inputs, n: int, name: str | None = None) -> Run:
    """Call ``fn`` once on fresh buffers of ``n`` elements, watched; refuse what the run alone shows."""
    buffers = upload(inputs, exercise.outputs, n)
    args = [buffers.views[a] if a in buffers.views else inputs[a] for a in exercise.args]
    ledger = Ledger(name or getattr(fn, "__name__", exercise.function))
    copies = Copies({id(view): key for key, view in buffers.views.items()})
    launches = Launches()
    try:
        with copies, ledger, launches:  # the launch watch last: its wrapper runs first, on the arrays as passed
            returned = fn(*args)
        cuda.synchronize()
    except Exception as error:
        _explain(exercise, error, launches.launched, n)
        raise
    failure = compile_failure(launches.launched)
    if failure:
        raise CheckFailed(failure)
    check_copies(exercise, copies, inputs, n)
    check_compiled_bounds(exercise, ledger, n)
    return Run(buffers, ledger, launches.launched, returned)


def _explain(exercise: Exercise, error: Exception, launched: Sequence[Launched], n: int) -> None:
    """Raise the check's own sentence for an error it recognises (else return, and the error stands)."""
    failure = compile_failure(launched)  # in the simulator the compiler speaks first, as it would on a GPU
    if failure:
        raise CheckFailed(failure) from None
    if isinstance(error, NotImplementedError) and not error.args:  # the stub's bare raise, marker or not
        raise CheckFailed(stub_message(exercise.function)) from None
    if isinstance(error, IndexError) and _SIM_INDEX.search(str(error)):  # the simulator stopped the thread
        raise CheckFailed(past_the_end(exercise, n)) from None
    if isinstance(error, HostArrayRefused):  # the ledger's own advice (allow_host_arrays) is not the student's to follow
        raise CheckFailed(host_array_message(exercise, error)) from None
    refused = isinstance(error, numba_errors.NumbaError) or type(error).__name__ == "UnsupportedBytecodeError"
    if refused and not is_simulator():  # on a GPU a kernel is compiled at its launch
        raise CheckFailed(compiler_message(launched[-1].name if launched else exercise.function, str(error))) from None


def host_array_message(exercise: Exercise, error: HostArrayRefused) -> str:
    """A launch on a host array: Numba would copy it around the launch, trips no kernel shows."""
    return (
        f"`{error.argument}`, an argument of `{error.kernel}`, is a host NumPy array: Numba would copy it to the "
        "device before the launch and back after it, trips over the host link that your kernel does not show. "
        f"The arrays `{exercise.function}` is given are on the device already: launch your kernel on them, "
        "without copying them to the host"
    )


def past_the_end(exercise: Exercise, n: int) -> str:
    """The one message for an index past the end, whichever way it was seen (so every backend
    gives the same words): the simulator's IndexError, the compiled code, or the guard region."""
    return (
        f"a thread indexed past the end of an array at n = {n}: a launch rounds the threads up to whole "
        f"blocks, and those with i >= {n} must not touch the arrays. Add a bounds guard, "
        f"`if i < {exercise.written[0]}.size:`, or check the one you have (`<`, not `<=`)"
    )


def check_compiled_bounds(exercise: Exercise, ledger: Ledger, n: int) -> None:
    """A launch whose compiled code reads or writes past an array's end (on a GPU nothing stops it)."""
    if any(isinstance(launch.refusal, OutOfBounds) for launch in ledger.launches):
        raise CheckFailed(past_the_end(exercise, n))


# --- copies: results that did not come from a kernel ---------------------------------------


def check_copies(exercise: Exercise, copies: Copies, inputs: Inputs, n: int) -> None:
    """Reject a result that came from the host, or any copy of n elements between device arrays."""
    if n < 2:  # at n = 1 a one-number helper array (a maximum, say) is as large as the problem
        return
    _check_from_host(exercise, copies, inputs, n)
    _check_on_device(exercise, copies.on_device(n))


def _check_from_host(exercise: Exercise, copies: Copies, inputs: Inputs, n: int) -> None:
    found = copies.from_host(n)
    if not found:
        return
    into = [c for c in found if c.target in exercise.written]
    first = into[0] if into else found[0]
    copied_back = {c.target for c in copies.to_host(n)}
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
    first_read = f"; it copied {names(read)} to the host first: the work was done on the host" if read else ""
    raise CheckFailed(
        f"{opening}{first_read}. The arrays are on the device already: compute the result in your own "
        f"`@cuda.jit` kernel from {names(arrays)} on the device, with no copy between host and device"
    )


def _check_on_device(exercise: Exercise, found: list[Copy]) -> None:
    if not found:
        return
    into = [c for c in found if c.target in exercise.written]
    first = into[0] if into else found[0]
    if first.target in exercise.written:
        kind = "a copy from another device array" if first.source or "copy" in first.how else "an assignment"
        opening = f"`{first.target}` was written by {kind} (`{first.how}`, {first.elements} elements), not by your kernel"
    elif first.source:
        opening = f"your function made a copy to another device array of `{first.source}` (`{first.how}`, " \
                  f"{first.elements} elements)"
    else:
        opening = f"your function copied {first.elements} elements between device arrays (`{first.how}`)"
    raise CheckFailed(
        f"{opening}: such a copy reads and writes every element once more, trips that no kernel of yours "
        f"shows. Have your kernel read the arrays it is given and store its results straight into "
        f"{names(list(exercise.written))}"
    )


def names(listed: Sequence[str]) -> str:
    """`a`, `a` and `b`, `a`, `b` and `c`."""
    quoted = [f"`{n}`" for n in listed]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


# --- why an output was never written -----------------------------------------------------


def rebound_outputs(exercise: Exercise, fn: Callable[..., Any]) -> list[tuple[str, str]]:
    """(the student's parameter, the exercise's array) for each output the function assigns anew."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    params = code.co_varnames[: code.co_argcount]
    stored: set[str] = set()
    for ins in dis.get_instructions(code):
        if ins.opname.startswith("STORE_") and ins.argval is not None:
            stored |= set(ins.argval) if isinstance(ins.argval, tuple) else {ins.argval}
    return [(params[k], a) for k, a in enumerate(exercise.args)
            if a in exercise.written and k < len(params) and params[k] in stored]


History = Sequence[tuple[int, Sequence[Launched]]]
"""(n, the launches made at n) for every size tried so far, smallest first."""


def fixed_grid(history: History) -> list[Launched]:
    """The launches of the last run whose grid stayed the same at every size tried, while the
    sizes grew enough that a grid computed from n would have grown fourfold or more."""
    if len(history) < 2 or blocks_for(history[-1][0]) < 4 * blocks_for(history[0][0]):
        return []
    last = history[-1][1]
    return [launch for k, launch in enumerate(last)
            if all(len(h) == len(last) and h[k].name == launch.name and h[k].threads == launch.threads
                   for _, h in history)]


def unwritten_cause(exercise: Exercise, fn: Callable[..., Any], done: Run,
                    history: History, n: int) -> Callable[[str, np.ndarray], str | None]:
    """A function that says why elements of an output were never written, when the run shows it."""

    def cause(name: str, missing: np.ndarray) -> str | None:
        verb = "written" if name in exercise.outputs else "updated"
        if missing.size == n and done.returned is not None:
            return (f"`{exercise.function}` returned a value ({type(done.returned).__name__}) and `{name}` was "
                    f"never {verb}: the check reads the result from `{name}`, the array it passes in. Have your "
                    f"kernel store the result into `{name}`; the function itself returns nothing")
        rebound = [p for p, a in rebound_outputs(exercise, fn) if a == name]
        if missing.size == n and rebound:
            return (f"`{exercise.function}` assigns a new array to its parameter `{rebound[0]}` (`{rebound[0]} = "
                    f"...`), so your kernel wrote that array and the `{name}` the check passed in was never {verb}. "
                    "Launch your kernel on the array you are given, without making a new one")
        view = done.buffers.views.get(name)
        for launch in fixed_grid(history):
            given = any(a is view for a in launch.args)  # the launch that was to write `name`
            if given and launch.threads < n and int(missing.min()) >= launch.threads:
                blocks, block = int(np.prod(launch.grid)), int(np.prod(launch.block))
                return (f"`{launch.name}` was launched with {launch.threads} threads ({blocks} blocks of {block}) "
                        f"at every size, so at n = {n} its grid does not cover n: {missing.size} of the {n} elements "
                        f"of `{name}` were never {verb}, from element {int(missing.min())} on. Compute the number "
                        f"of blocks from n (`blocks_for({name}.size)`), or loop over the elements with a "
                        "grid-stride loop")
        return None

    return cause
