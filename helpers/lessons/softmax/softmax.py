"""Counting lessons 11 and 12's kernels in the simulator, from a GPU too.

These kernels loop along a row inside a block, which the compiled-code counter cannot
count; :func:`count_in_simulator` runs a function that fills ledgers (such as
:func:`helpers.lessons.softmax.kernels.count_ledgers`) with the simulator counting every
access, in a simulator subprocess when this process runs on a GPU.

Notebook 11 reaches the softmax kernels' ``count_ledgers``, ``default_threads`` and
``reference`` through this module too (``softmax.reference(x)``): they live in
:mod:`helpers.lessons.softmax.kernels`.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Callable

from helpers.backend import is_simulator
from helpers.counting.other_backend import SIMULATOR, OtherBackendError, run_under
from helpers.ledger import Ledger

from .kernels import count_ledgers, default_threads, reference

__all__ = ["Counted", "count_in_simulator", "count_ledgers", "count_request", "counted", "default_threads", "reference"]


# --- counting -------------------------------------------------------------------------


@dataclass
class Counted:
    """A ledger's totals and table, as plain values (they cross a process boundary)."""

    name: str
    launches: int
    trips: int
    bytes_per_element: float
    bytes_moved: int
    elements: int
    table: str
    summary: str
    round_trips: list[str]
    bytes_by_array: dict[str, int]  # read + written, over all launches

    def show(self) -> None:
        print(self.table)
        print(self.summary)


def counted(ledger: Ledger) -> Counted:
    """The plain-value record of one ledger."""
    by_array: dict[str, int] = {}
    for launch in ledger.launches:
        for a in launch.counted_arrays():
            by_array[a.name] = by_array.get(a.name, 0) + a.bytes_read + a.bytes_written
    return Counted(ledger.name, len(ledger.launches), ledger.trips, ledger.bytes_per_element(), ledger.bytes_moved, ledger.elements,
                   ledger.table(), ledger.summary(), ledger.round_trips(), by_array)


def count_in_simulator(function: Callable[..., list[Ledger]], **kwargs: Any) -> list[Counted]:
    """Call ``function(**kwargs)`` (it fills ledgers) with the simulator counting every access.

    These kernels loop along a row inside a block, which the compiled-code counter
    cannot count; the simulator counts every element each thread touches.  On a GPU
    the function runs in a simulator subprocess, so both backends print one count.
    """
    if is_simulator():
        return [counted(ledger) for ledger in function(**kwargs)]
    request = {"function": f"{function.__module__}:{function.__name__}", "kwargs": kwargs}
    try:
        rows = run_under(SIMULATOR, "helpers.lessons.softmax.softmax:count_request", request)
    except OtherBackendError as exc:
        raise RuntimeError(f"counting {function.__name__} in the simulator failed: {exc}") from exc
    return [Counted(**row) for row in rows]


def count_request(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The simulator's side of :func:`count_in_simulator`: call the named helpers function, return its counts."""
    module, _, name = request["function"].partition(":")
    if not module.startswith("helpers."):
        raise ValueError(f"count_in_simulator counts functions of helpers modules, got {request['function']!r}")
    function = getattr(importlib.import_module(module), name)
    return [dataclasses.asdict(counted(ledger)) for ledger in function(**request["kwargs"])]
