"""Compiling a student's kernels for a GPU while the lesson runs in the simulator.

The simulator runs a kernel as Python: code that a GPU's compiler refuses (a list, a
call of a plain Python function, ``sum`` of a sequence) runs there and can give the
right values.  So in the simulator each kernel the student's function launched is
also compiled for a GPU by the real compiler (NVVM needs no GPU), the way the static
counter compiles it (:func:`helpers.counting.ptx.compile_ptx`, in a subprocess, its
PTX cached).  A kernel the compiler refuses fails the check with the compiler's own
reason, in the words a GPU gives when the same launch fails there
(:func:`compiler_message` serves both).
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Sequence

from numba.core import errors as numba_errors

from ..backend import is_simulator, uncoloured
from ..counting import CannotAttribute
from ..counting.other_backend import OtherBackendError
from ..counting.ptx import compile_ptx, describe_arg, global_names
from .watch import Launched

_PREFIX = re.compile(r"^(?:[\w.]+\.)?\w+(?:Error|Construct): ")
_PIPELINE = re.compile(r"^Failed in \w+ mode pipeline \(step: [^)]*\)\s*")
_ENDS = (" File \"", " During:", " There are ", " - Of which", " Rejected as", " <source")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.+@-]+)+[\\/]([\w.+@-]+)")
_HINTS = {
    "Untyped global name": "a kernel can call only functions compiled for the device: put "
    "`@cuda.jit(device=True)` above the function it calls",
    "reflected list": "a kernel cannot build Python lists: keep the values in variables",
    "list(": "a kernel cannot build Python lists: keep the values in variables",
    "NRT required": "a kernel cannot allocate Python objects (lists, dicts, strings): keep the values in variables",
}


def is_compiler_refusal(kind: str) -> bool:
    """True when an error of class ``kind`` is the compiler refusing the code (not a missing toolkit)."""
    found = getattr(numba_errors, kind, None)
    return kind == "UnsupportedBytecodeError" or (isinstance(found, type) and issubclass(found, numba_errors.NumbaError))


def compiler_reason(text: str) -> str:
    """The compiler's reason in one short sentence: its first statement, without machine paths."""
    flat = " ".join(uncoloured(text).split())  # Numba colours its messages on some terminals
    flat = re.sub(r"\s+([.,:;])", r"\1", flat)
    flat = _PIPELINE.sub("", _PREFIX.sub("", flat))
    flat = _PIPELINE.sub("", flat)
    cut = min((i for i in (flat.find(end) for end in _ENDS) if i > 0), default=len(flat))
    reason = _PATH.sub(r"\1", flat[:cut]).strip().rstrip(".:")
    return reason if len(reason) <= 240 else reason[:240].rsplit(" ", 1)[0] + " ..."


def compiler_message(kernel: str, text: str) -> str:
    """What the student reads when the compiler refuses ``kernel`` (the same words on every backend)."""
    reason = compiler_reason(text)
    hint = next((h for key, h in _HINTS.items() if key in reason), "")
    return (
        f"`{kernel}` does not compile for a GPU: {reason}. "
        + (f"{hint[0].upper()}{hint[1:]}. " if hint else "")
        + "The simulator runs a kernel as Python, so it may run there; a GPU compiles it first, "
        "and accepts only what Numba's CUDA compiler supports"
    )


def _plain_functions(py_func: Any, seen: set[Any] | None = None) -> list[str]:
    """Globals of a kernel (and of its device functions) that are plain Python functions."""
    seen = set() if seen is None else seen
    seen.add(py_func)
    found = []
    for name in sorted(global_names(py_func.__code__)):
        value = py_func.__globals__.get(name)
        inner = getattr(value, "py_func", None) or getattr(value, "fn", None)
        if inspect.isfunction(value):
            found.append(name)
        elif inspect.isfunction(inner) and inner not in seen:
            found += _plain_functions(inner, seen)
    return found


def compile_failure(launched: Sequence[Launched]) -> str | None:
    """In the simulator: the message for the first launched kernel a GPU's compiler refuses, or None.

    On a GPU this says nothing: every launch was compiled there before it ran.  A kernel
    whose source cannot be carried to the compiler is not judged here.
    """
    if not is_simulator():
        return None
    tried: set[tuple[Any, ...]] = set()
    for launch in launched:
        py_func = getattr(launch.kernel, "fn", None) or getattr(launch.kernel, "py_func", None)
        try:
            argtypes = tuple(describe_arg(a) for a in launch.args)
        except CannotAttribute:
            continue
        if py_func is None or (py_func, argtypes) in tried:
            continue
        tried.add((py_func, argtypes))
        plain = _plain_functions(py_func)
        if plain:  # the words Numba's CUDA compiler gives for it
            return compiler_message(launch.name, f"Untyped global name '{plain[0]}': Cannot determine Numba "
                                                 "type of <class 'function'>")
        try:
            compile_ptx(launch.kernel, argtypes)
        except CannotAttribute as refusal:
            cause = refusal.__cause__
            if isinstance(cause, OtherBackendError) and is_compiler_refusal(cause.kind):
                return compiler_message(launch.name, str(cause))
    return None
