"""Count a launch's memory traffic two ways and put the counts side by side.

* **Static** (:func:`static_traffic`): global loads and stores per thread, read from
  the compiled PTX (:mod:`helpers.counting.ptx`), times the threads that pass the bounds
  guard (every element, for a grid-stride loop), times the bytes per access.
* **Simulated** (:func:`simulated_traffic`): the kernel runs in Numba's CUDA
  simulator, and every element each thread loads or stores is recorded.

Both count the same thing, by definition: the *distinct* elements each thread
reads from and writes to each array.  A thread that reads ``x[i]`` twice makes one
load (the second read comes from a register: the compiler usually removes it, and
the static counter drops it where the compiler could not); a read of an element the
thread has just written is not a load either.  ``x[i]`` and ``x[i + 1]`` are two
loads.  With that definition the two counts agree exactly, and the tests check it
for every kernel of the series.

The third count, Nsight Compute's DRAM bytes, is in :mod:`helpers.lab.ncu`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..backend import is_simulator
from .ptx import CannotAttribute, PtxCounts, count_global_accesses, describe_arg, kernel_source

Dims = int | Sequence[int]


@dataclass
class Traffic:
    """Bytes one launch read from and wrote to each array argument."""

    kernel: str
    method: str  # "ptx" or "simulator"
    read: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)

    @property
    def bytes_read(self) -> int:
        return sum(self.read.values())

    @property
    def bytes_written(self) -> int:
        return sum(self.written.values())

    def per_array(self) -> dict[str, tuple[int, int]]:
        """``{array: (bytes read, bytes written)}`` for every array argument."""
        return {name: (self.read.get(name, 0), self.written.get(name, 0)) for name in {**self.read, **self.written}}


def _dims(dim: Any) -> tuple[int, ...]:
    """A grid or block size as a tuple: an int, a sequence, or Numba's Dim3 (x, y, z)."""
    if isinstance(dim, (int, np.integer)):
        return (int(dim),)
    if hasattr(dim, "x"):
        return tuple(int(getattr(dim, axis)) for axis in ("x", "y", "z"))
    return tuple(int(d) for d in dim)


def launch_dims(griddim: Any, blockdim: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Grid and block as tuples of the launch's real dimensionality.

    Numba pads every launch to 3-D; trailing dimensions of size 1 in both grid and
    block are dropped, so a 1-D launch compares with a 1-D array's bounds guard.
    """
    grid, block = _dims(griddim), _dims(blockdim)
    size = max(len(grid), len(block))
    grid, block = grid + (1,) * (size - len(grid)), block + (1,) * (size - len(block))
    while size > 1 and grid[size - 1] == 1 and block[size - 1] == 1:
        size -= 1
    return grid[:size], block[:size]


def _arrays(args: Sequence[Any]) -> list[int]:
    return [i for i, a in enumerate(args) if hasattr(a, "shape") and not isinstance(a, np.generic)]


def _names(args: Sequence[Any], names: Sequence[str] | None) -> list[str]:
    if names is None:
        return [f"arg{i}" for i in range(len(args))]
    if len(names) != len(args):
        raise ValueError(f"got {len(names)} names for {len(args)} arguments")
    return list(names)


def threads_passing_guard(griddim: Dims, blockdim: Dims, shape: Sequence[int]) -> int:
    """Threads whose index falls inside ``shape``: what a bounds guard lets through.

    A 1-D launch over a 1-D array gives ``min(threads, n)``; a 2-D launch over a
    2-D array clips each dimension (x against ``shape[0]``, y against
    ``shape[1]``), as ``cuda.grid(2)`` with ``if i < shape[0] and j < shape[1]``
    does.  Otherwise the launch is treated as flat: ``min(threads, size)``.
    """
    grid, block = _dims(griddim), _dims(blockdim)
    if len(grid) != len(block):
        raise ValueError(f"grid {grid} and block {block} have different numbers of dimensions")
    extents = [g * b for g, b in zip(grid, block)]
    if len(extents) == len(shape) > 1:
        return prod(min(e, s) for e, s in zip(extents, shape))
    return min(prod(extents), prod(shape))


def _guard_shape(counts: Any, ndim: int, args: Sequence[Any]) -> tuple[int, ...] | None:
    """The extent the bounds guard lets through, per grid dimension (``None``: no guard)."""
    if not counts.guard_sizes:
        return None
    flat = [int(args[arg].size) for arg, dim in counts.guard_sizes if dim < 0]
    per_dim: dict[int, list[int]] = {}
    for arg, dim in counts.guard_sizes:
        if dim >= 0:
            per_dim.setdefault(dim, []).append(int(args[arg].shape[dim]))
    if ndim == 1:
        return (min(flat + per_dim.get(0, [])),)
    if flat or any(d >= ndim for d in per_dim):
        raise CannotAttribute(
            f"the bounds guard of this {ndim}-D launch compares with sizes that do not match its dimensions"
        )
    return tuple(min(per_dim[d]) if d in per_dim else 2**62 for d in range(ndim))


def static_traffic(kernel: Any, griddim: Dims, blockdim: Dims, args: Sequence[Any], names: Sequence[str] | None = None,
                   counts: PtxCounts | None = None) -> Traffic:
    """The launch's traffic as the compiled PTX predicts it.

    Accesses per thread (per iteration of a grid-stride loop) times the threads
    that pass the bounds guard (the elements the loop covers), times their bytes.
    The guard's bound is read from the PTX: the array sizes its branches compare
    the thread index with.  Raises :class:`helpers.counting.ptx.CannotAttribute`, with the
    reason, where the PTX does not say (``out[idx[i]]``, ``if x[i] > 0``, a guard
    such as ``i + 1 < n``): never a guessed number.  ``counts`` may be given when the
    PTX was already analysed (the ledger analyses the launched kernel's own PTX).
    """
    names = _names(args, names)
    func = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    counts = counts if counts is not None else count_global_accesses(kernel, args)
    counts.require_attributed(func.__name__)
    grid, block = launch_dims(griddim, blockdim)
    if counts.guard_offset and not counts.grid_stride:
        raise CannotAttribute(
            f"the bounds guard of {func.__name__} compares the thread index with an array size plus "
            "a constant (e.g. i + 1 < n), so the static counter cannot say how many threads pass it"
        )
    bound = _guard_shape(counts, len(grid), args)
    threads = prod(grid) * prod(block)
    guarded = threads if bound is None else threads_passing_guard(grid, block, bound)
    if counts.has_loop and bound is None:
        raise CannotAttribute(f"the loop in {func.__name__} compares with no array size: its range is unknown")
    covered = prod(bound) if bound is not None else 0
    traffic = Traffic(func.__name__, "ptx")
    for i in _arrays(args):
        for op, total in (("load", traffic.read), ("store", traffic.written)):
            nbytes = sum(
                a.nbytes * (covered if a.in_loop else guarded)
                for a in counts.accesses
                if a.op == op and a.arg_index == i
            )
            total[names[i]] = total.get(names[i], 0) + nbytes
    return traffic


# --- the simulator count ---------------------------------------------------------


class _ThreadTouches:
    """Which elements each simulated thread has loaded and stored, per array."""

    def __init__(self) -> None:
        self.loaded: set[tuple[Any, int]] = set()
        self.stored: set[tuple[Any, int]] = set()
        self.lock = threading.Lock()

    @staticmethod
    def _thread() -> Any:
        t = threading.current_thread()
        block, thread = getattr(t, "blockIdx", None), getattr(t, "threadIdx", None)
        if block is None:
            return ("host", threading.get_ident())
        return (tuple(block), tuple(thread))

    def load(self, flat: np.ndarray) -> None:
        who = self._thread()
        with self.lock:
            for e in flat.tolist():
                key = (who, e)
                if key not in self.stored:
                    self.loaded.add(key)

    def store(self, flat: np.ndarray) -> None:
        who = self._thread()
        with self.lock:
            self.stored.update((who, e) for e in flat.tolist())

    def counts(self) -> tuple[int, int]:
        """(distinct loads, distinct stores): a load after a store of the same element is not counted."""
        return len(self.loaded), len(self.stored)


def _flat_elements(shape: tuple[int, ...], idx: Any) -> np.ndarray:
    """Flat indices of the elements ``array[idx]`` touches."""
    if isinstance(idx, (int, np.integer)) and len(shape) == 1:
        return np.array([int(idx) % shape[0]])
    return np.arange(prod(shape)).reshape(shape)[idx].ravel()


def simulated_traffic(kernel: Any, griddim: Dims, blockdim: Dims, args: Sequence[Any], names: Sequence[str] | None = None) -> Traffic:
    """Run the launch in the CUDA simulator and count the distinct elements each thread touches.

    In the simulator this runs here (arrays must be device arrays).  On a GPU the
    kernel's source and the arguments are sent to a subprocess that runs the
    simulator, so the count is available on both backends.  Do not call it inside
    a ``Ledger`` block: the ledger wraps arrays with its own counter.
    """
    names = _names(args, names)
    if not is_simulator():
        return _simulate_in_subprocess(kernel, griddim, blockdim, args, names)
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            raise TypeError(f"`{names[i]}` is a host (NumPy) array; pass a device array (cuda.to_device)")
    wrapped, touches = recording_arguments(args)
    kernel[_dims(griddim), _dims(blockdim)](*wrapped)
    func = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    return traffic_from_touches(func.__name__, args, names, touches)


def recording_arguments(args: Sequence[Any]) -> tuple[list[Any], dict[int, _ThreadTouches]]:
    """Simulator device arrays wrapped so that each thread's distinct accesses are recorded.

    Returns the arguments to launch with and, per array argument index, its record.
    """
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class TouchRecordingArray(FakeCUDAArray):
        """The simulator's device array, recording each element a thread touches."""

        def __init__(self, base: FakeCUDAArray, touches: _ThreadTouches) -> None:
            super().__init__(base._ary, stream=base.stream)
            self._touches = touches

        def __getitem__(self, idx: Any) -> Any:
            self._touches.load(_flat_elements(self._ary.shape, idx))
            return super().__getitem__(idx)

        def __setitem__(self, idx: Any, value: Any) -> None:
            self._touches.store(_flat_elements(self._ary.shape, idx))
            super().__setitem__(idx, value)

    touches = {i: _ThreadTouches() for i, a in enumerate(args) if isinstance(a, FakeCUDAArray)}
    wrapped = [TouchRecordingArray(a, touches[i]) if i in touches else a for i, a in enumerate(args)]
    return wrapped, touches


def traffic_from_touches(kernel_name: str, args: Sequence[Any], names: Sequence[str],
                         touches: dict[int, _ThreadTouches]) -> Traffic:
    """Bytes per array from the recorded distinct loads and stores."""
    traffic = Traffic(kernel_name, "simulator")
    for i, t in touches.items():
        loads, stores = t.counts()
        itemsize = args[i].dtype.itemsize
        traffic.read[names[i]] = traffic.read.get(names[i], 0) + loads * itemsize
        traffic.written[names[i]] = traffic.written.get(names[i], 0) + stores * itemsize
    return traffic


_WORKER = """
import json, os, sys
import numpy as np
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import helpers
from numba import cuda
from helpers.counting import simulated_traffic
request = json.load(sys.stdin)
namespace = {"cuda": cuda}
exec(request["source"], namespace)
kernel = cuda.jit(namespace[request["name"]])
data = np.load(request["arrays"])
args = [cuda.to_device(data[a["array"]]) if "array" in a else np.dtype(a["dtype"]).type(a["value"])
        for a in request["args"]]
t = simulated_traffic(kernel, request["grid"], request["block"], args, request["names"])
sys.stdout.write(json.dumps({"read": t.read, "written": t.written}))
"""


def _simulate_in_subprocess(kernel: Any, griddim: Dims, blockdim: Dims, args: Sequence[Any], names: list[str]) -> Traffic:
    func = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    threads = prod(_dims(griddim)) * prod(_dims(blockdim))
    if threads > 20_000:
        raise ValueError(
            f"{threads} threads would take minutes in the simulator (about 5k threads/s); "
            "count a small launch instead: bytes per element do not depend on n"
        )
    with tempfile.TemporaryDirectory() as tmp:
        arrays, spec = {}, []
        for i, a in enumerate(args):
            if hasattr(a, "copy_to_host"):
                arrays[f"a{i}"] = a.copy_to_host()
                spec.append({"array": f"a{i}"})
            elif isinstance(a, np.ndarray):
                raise TypeError(f"`{names[i]}` is a host (NumPy) array; pass a device array (cuda.to_device)")
            else:
                spec.append({"dtype": describe_arg(a).dtype, "value": a.item() if hasattr(a, "item") else a})
        path = os.path.join(tmp, "arrays.npz")
        np.savez(path, **arrays)
        request = {
            "source": kernel_source(func),
            "name": func.__name__,
            "grid": list(_dims(griddim)),
            "block": list(_dims(blockdim)),
            "args": spec,
            "names": names,
            "arrays": path,
        }
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, "-c", _WORKER], input=json.dumps(request), capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise RuntimeError(f"the simulator count of {func.__name__} failed: {last[0]}")
    result = json.loads(done.stdout)
    return Traffic(func.__name__, "simulator", result["read"], result["written"])


# --- side by side ----------------------------------------------------------------


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


def _per_element(nbytes: int, n: int) -> str:
    value = nbytes / n
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def comparison_table(rows: Sequence[Comparison], n: int) -> str:
    """Bytes per element (read + written) counted both ways, one row per launch."""
    header = ("kernel", "PTX (static)", "simulator", "agree")
    lines = [header]
    for r in rows:
        sim = f"{_per_element(r.simulated.bytes_read, n)} + {_per_element(r.simulated.bytes_written, n)}"
        if r.static is None:
            static = "cannot attribute"
        else:
            static = f"{_per_element(r.static.bytes_read, n)} + {_per_element(r.static.bytes_written, n)}"
        lines.append((r.kernel, static, sim, "yes" if r.agree else "NO"))
    widths = [max(len(row[c]) for row in lines) for c in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in lines)
