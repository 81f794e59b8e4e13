"""Count a launch's memory traffic two ways (:func:`static_traffic`, :func:`simulated_traffic`), side by side.

Both count the *distinct* elements each thread reads from and writes to each array: ``x[i]`` read twice is one
load (the second comes from a register), a read of an element the thread has just written is none.  So defined the
two agree exactly (tests/test_corpus.py), or the static count refuses with the construct it cannot follow.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from math import prod
from typing import Any, Callable, Sequence

import numpy as np

from ..backend import is_simulator
from ..validate import kernel_function
from .carry import build_function, function_spec
from .other_backend import SIMULATOR, OtherBackendError, run_under
from .ptx import compile_ptx
from .ptx.machine import emulate
from .record import CannotAttribute, ElementCounts, LaunchArgs, Traffic, copies_for_a_count, short_number

Dims = int | Sequence[int]


def _dims(dim: Any) -> tuple[int, ...]:
    """A grid or block size as a tuple: an int, a sequence, or Numba's Dim3 (x, y, z)."""
    if isinstance(dim, (int, np.integer)):
        return (int(dim),)
    if hasattr(dim, "x"):
        return tuple(int(getattr(dim, axis)) for axis in ("x", "y", "z"))
    return tuple(int(d) for d in dim)


def launch_dims(griddim: Any, blockdim: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Grid and block as tuples of the launch's real dimensionality (Numba pads to 3-D; trailing dimensions of
    size 1 in both are dropped, so a 1-D launch compares with a 1-D array's bounds guard)."""
    grid, block = _dims(griddim), _dims(blockdim)
    size = max(len(grid), len(block))
    grid, block = grid + (1,) * (size - len(grid)), block + (1,) * (size - len(block))
    while size > 1 and grid[size - 1] == 1 and block[size - 1] == 1:
        size -= 1
    return grid[:size], block[:size]


Names = Sequence[str] | LaunchArgs | None
"""How a count names the arguments: a name each, or the launch's record (which names them), or ``arg0, arg1 ...``."""


def _launch_args(args: Sequence[Any] | LaunchArgs, names: Names) -> LaunchArgs:
    """The launch's record: given (as ``args`` or ``names``), or read from the values."""
    return next((a for a in (args, names) if isinstance(a, LaunchArgs)), None) or LaunchArgs.of(args, names)


def _kernel_name(kernel: Any) -> str:
    return str(kernel_function(kernel).__name__)


def static_traffic(kernel: Any, griddim: Dims, blockdim: Dims, args: Sequence[Any] | LaunchArgs,
                   names: Sequence[str] | None = None, ptx: str | None = None) -> Traffic:
    """The launch's traffic as its compiled PTX says (:mod:`.ptx.machine`), without running it on the GPU: the true
    count or :class:`CannotAttribute`, never a guess.  ``args`` may be the values or their :class:`LaunchArgs`;
    ``ptx`` the code already compiled (the ledger's)."""
    launch, name = _launch_args(args, names), _kernel_name(kernel)
    ptx = compile_ptx(kernel, launch.argtypes) if ptx is None else ptx
    return Traffic(name, "ptx", launch.traffic(emulate(ptx, launch, *launch_dims(griddim, blockdim), name)))


class _ThreadTouches:
    """Which elements each simulated thread has loaded and stored, in one array (counted as the module says)."""

    def __init__(self) -> None:
        self.loaded: set[tuple[Any, int]] = set()
        self.stored: set[tuple[Any, int]] = set()
        self.lock = threading.Lock()

    @staticmethod
    def _thread() -> Any:
        t = threading.current_thread()
        if getattr(t, "blockIdx", None) is None:
            return ("host", threading.get_ident())
        return (tuple(t.blockIdx), tuple(t.threadIdx))

    def load(self, flat: np.ndarray) -> None:
        who = self._thread()
        with self.lock:
            self.loaded.update({(who, e) for e in flat.tolist()} - self.stored)

    def store(self, flat: np.ndarray) -> None:
        who = self._thread()
        with self.lock:
            self.stored.update((who, e) for e in flat.tolist())


def _element_counts(touches: dict[int, _ThreadTouches]) -> ElementCounts:
    return ElementCounts({i: len(t.loaded) for i, t in touches.items()}, {i: len(t.stored) for i, t in touches.items()})


def _flat_elements(shape: tuple[int, ...], idx: Any) -> np.ndarray:
    """Flat indices of the elements ``array[idx]`` touches."""
    if isinstance(idx, (int, np.integer)) and len(shape) == 1:
        if not -shape[0] <= int(idx) < shape[0]:
            return np.array([], dtype=np.int64)  # out of range: the access itself raises IndexError
        return np.array([int(idx) % shape[0]])
    return np.arange(prod(shape)).reshape(shape)[idx].ravel()


def simulated_traffic(kernel: Any, griddim: Dims, blockdim: Dims, args: Sequence[Any], names: Names = None) -> Traffic:
    """Run the launch in the CUDA simulator, counting the distinct elements each thread touches: here, or on a GPU
    in a simulator subprocess (the kernel carried by :mod:`.carry`).  Not inside a ``Ledger`` block (it wraps arrays
    with its own counter).  A thread indexing outside an array raises ``IndexError`` naming it."""
    record = _launch_args(args, names)
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            raise TypeError(f"`{record.names[i]}` is a host (NumPy) array; pass a device array (cuda.to_device)")
    if not is_simulator():
        return _simulate_in_subprocess(kernel, griddim, blockdim, args, record)
    counts = _simulated_counts(kernel, griddim, blockdim, args, record.names)
    return Traffic(_kernel_name(kernel), "simulator", record.traffic(counts))


def _simulated_counts(kernel: Any, griddim: Dims, blockdim: Dims, args: Sequence[Any], names: Sequence[str]) -> ElementCounts:
    """The launch run here, in the simulator, recording each thread's distinct accesses."""
    wrapped, touches = recording_arguments(args, names)
    kernel[_dims(griddim), _dims(blockdim)](*wrapped)
    return _element_counts(touches)


_OUT_OF_BOUNDS = re.compile(r"index (-?\d+) is out of bounds")


def _named_index_error(error: IndexError, name: str, shape: tuple[int, ...]) -> IndexError:
    """The simulator's ``IndexError``, its words kept first, then the array named and the fix."""
    text = str(error)
    found = _OUT_OF_BOUNDS.search(text)
    if found is None:
        return IndexError(f"{text} (indexing `{name}`)")
    where = "before the start" if int(found.group(1)) < 0 else "past the end"
    bounds = " and ".join(f"{v} < {name}.shape[{k}]" for k, v in enumerate("ijk"[:len(shape)]))
    size, guard = (f"{shape[0]} elements", f"i < {name}.size") if len(shape) == 1 else (f"shape {shape}", bounds)
    return IndexError(f"{text}: a thread indexed {where} of `{name}` ({size}); add a bounds guard, "
                      f"such as `if {guard}:`, or pass arrays as long as the launch needs")


@lru_cache(maxsize=1)
def _array_classes() -> tuple[type, type]:
    """The simulator's device array; and that, naming itself when a thread indexes outside it and, given a
    :class:`_ThreadTouches`, recording each element a thread touches."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class NamedArray(FakeCUDAArray):
        def __init__(self, base: FakeCUDAArray, name: str, touches: _ThreadTouches | None) -> None:
            super().__init__(base._ary, stream=base.stream)
            self._name, self._touches = name, touches

        def _access(self, idx: Any, touch: str, access: Callable[[], Any]) -> Any:
            try:
                if self._touches is not None:
                    getattr(self._touches, touch)(_flat_elements(self._ary.shape, idx))
                return access()
            except IndexError as error:
                raise _named_index_error(error, self._name, self._ary.shape) from None

        def __getitem__(self, idx: Any) -> Any:
            return self._access(idx, "load", lambda: super(NamedArray, self).__getitem__(idx))

        def __setitem__(self, idx: Any, value: Any) -> None:
            self._access(idx, "store", lambda: super(NamedArray, self).__setitem__(idx, value))

    return FakeCUDAArray, NamedArray


def naming_arguments(args: Sequence[Any], names: Sequence[str],
                     touches: dict[int, _ThreadTouches] | None = None) -> list[Any]:
    """Simulator device arrays wrapped so that an index outside one raises ``IndexError`` naming it (and an array
    given a record in ``touches``, by index, records each thread's distinct accesses)."""
    device, named = _array_classes()
    touches = touches or {}
    return [named(a, names[i], touches.get(i)) if isinstance(a, device) else a for i, a in enumerate(args)]


def recording_arguments(args: Sequence[Any], names: Sequence[str]) -> tuple[list[Any], dict[int, _ThreadTouches]]:
    """:func:`naming_arguments` recording every array: the arguments to launch with, and each array's record."""
    device, _ = _array_classes()
    touches = {i: _ThreadTouches() for i, a in enumerate(args) if isinstance(a, device)}
    return naming_arguments(args, names, touches), touches


def traffic_from_touches(kernel_name: str, record: LaunchArgs, touches: dict[int, _ThreadTouches]) -> Traffic:
    """Bytes per array from the recorded distinct loads and stores (names and item sizes from ``record``)."""
    return Traffic(kernel_name, "simulator", record.traffic(_element_counts(touches)))


def simulate_request(request: dict[str, Any]) -> dict[str, Any]:
    """Count one launch in the simulator (run by :mod:`.other_backend` when the lesson is on a GPU):
    the elements each argument's threads loaded and stored, which the caller turns into bytes."""
    from numba import cuda  # under the simulator: this runs in its subprocess
    kernel = cuda.jit(build_function(request["kernel"], cuda))
    data = np.load(request["arrays"])
    args = [cuda.to_device(data[a["array"]]) if "array" in a else np.dtype(a["dtype"]).type(a["value"])
            for a in request["args"]]
    return _simulated_counts(kernel, request["grid"], request["block"], args, request["names"]).to_json()


# raised again as themselves: the kernel's own (an index past the end), a refusal of a global the simulator lacks
_SAME_KIND: dict[str, type[Exception]] = {kind.__name__: kind for kind in (IndexError, TypeError, CannotAttribute)}


def _own_words(exc: OtherBackendError) -> str:
    """The subprocess's message without its leading ``module.Kind: ``."""
    head, sep, rest = str(exc).partition(": ")
    return rest if sep and head.split(".")[-1] == exc.kind else str(exc)


def _simulate_in_subprocess(kernel: Any, griddim: Dims, blockdim: Dims, args: Sequence[Any], names: Names) -> Traffic:
    """The launch counted in a simulator subprocess (how a GPU process takes the dynamic count)."""
    record = _launch_args(args, names)
    name = _kernel_name(kernel)
    grid, block = _dims(griddim), _dims(blockdim)
    threads = prod(grid) * prod(block)
    if threads > 20_000:
        raise ValueError(f"{threads} threads would take minutes in the simulator (about 5k threads/s); "
                         "count a small launch instead: bytes per element do not depend on n")
    carried = function_spec(kernel_function(kernel))  # refused here, naming the global, before anything is copied
    with copies_for_a_count():  # each array's contents (host arrays were refused by simulated_traffic)
        arrays = {f"a{i}": a.copy_to_host() for i, a in enumerate(args) if hasattr(a, "copy_to_host")}
    numpy_name = {"boolean": "bool"}  # a scalar travels as its type, in NumPy's words, and its value
    spec = [{"array": f"a{i}"} if f"a{i}" in arrays else {"dtype": numpy_name.get(a.dtype, a.dtype), "value": a.value}
            for i, a in enumerate(record.args)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "arrays.npz")
        np.savez(path, **arrays)
        request = {"kernel": carried, "grid": list(grid), "block": list(block), "args": spec, "names": record.names,
                   "arrays": path}
        try:
            result = run_under(SIMULATOR, "helpers.counting.traffic:simulate_request", request)
        except OtherBackendError as exc:
            if exc.kind in _SAME_KIND:  # what the same launch raises when counted in-process
                raise _SAME_KIND[exc.kind](_own_words(exc)) from None
            raise RuntimeError(f"the simulator count of {name} failed: {exc}") from exc
    return Traffic(name, "simulator", record.traffic(ElementCounts.from_json(result)))


@dataclass
class Comparison:
    """The static and simulated counts of one launch."""

    kernel: str
    static: Traffic | None
    simulated: Traffic
    cannot_attribute: str | None = None  # the static counter's reason, when it has no count

    @property
    def agree(self) -> bool:
        return self.static is not None and self.static.per_array() == self.simulated.per_array()


def compare_counts(kernel: Any, griddim: Dims, blockdim: Dims, args: Sequence[Any], names: Sequence[str] | None = None) -> Comparison:
    """Both counts of one launch (the static one may be "cannot attribute", with its reason)."""
    simulated = simulated_traffic(kernel, griddim, blockdim, args, names)
    try:
        static: Traffic | None = static_traffic(kernel, griddim, blockdim, args, names)
        reason = None
    except CannotAttribute as exc:
        static, reason = None, str(exc)
    return Comparison(simulated.kernel, static, simulated, reason)


def comparison_table(rows: Sequence[Comparison], n: int) -> str:
    """Bytes per element (read + written) counted both ways, one row per launch."""
    def both(t: Traffic) -> str:
        return f"{short_number(t.bytes_read / n)} + {short_number(t.bytes_written / n)}"

    lines = [("kernel", "PTX (static)", "simulator", "agree")]
    lines += [(r.kernel, "cannot attribute" if r.static is None else both(r.static), both(r.simulated),
               "yes" if r.agree else "NO") for r in rows]
    widths = [max(map(len, column)) for column in zip(*lines)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in lines)
