"""Compile a kernel to PTX with ``numba.cuda.compile_ptx`` (NVVM, no GPU needed): in this process on a GPU; in the
simulator, whose ``numba.cuda`` has no compiler, its self-contained source (:func:`kernel_source`) in a subprocess
with the real one (:mod:`..other_backend`), the PTX cached on disk (:func:`cache_dir`)."""

from __future__ import annotations

import ast
import dis
import hashlib
import inspect
import json
import os
import textwrap
import types as pytypes
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from ...backend import is_simulator
from ...device import compute_capability
from ...validate import kernel_function
from ..other_backend import COMPILER, OtherBackendError, error_detail, run_under
from ..record import ArgInfo, ArgType, CannotAttribute


def describe_arg(value: Any) -> ArgType:
    """The :class:`ArgType` Numba would infer for a kernel argument."""
    try:
        return ArgInfo.of("argument", value).argtype
    except TypeError as exc:
        raise CannotAttribute(f"cannot attribute accesses for an argument of type {type(value).__name__}") from exc


def global_names(code: pytypes.CodeType) -> set[str]:
    """Names the code reads as globals (not attribute names such as the ``x`` of ``threadIdx.x``)."""
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    return names.union(*(global_names(c) for c in code.co_consts if isinstance(c, pytypes.CodeType)))


def function_source(py_func: Any) -> str:
    """``py_func``'s source without its decorators (``@cuda.jit``); :class:`CannotAttribute` where it cannot be read."""
    try:
        func = ast.parse(textwrap.dedent(inspect.getsource(py_func))).body[0]
    except (OSError, TypeError) as exc:
        raise CannotAttribute(f"cannot read the source of {py_func.__name__}: {exc}") from exc
    if not isinstance(func, ast.FunctionDef):
        raise CannotAttribute("expected a function definition")
    func.decorator_list = []
    return ast.unparse(func)


def kernel_source(py_func: Any, _seen: set[str] | None = None) -> str:
    """Self-contained source for ``py_func`` and the device functions and constants it uses."""
    import numba  # here, not at the top: import helpers chooses the backend before numba loads
    seen = set() if _seen is None else _seen
    own = function_source(py_func)
    header: list[str] = []
    for name in sorted(global_names(py_func.__code__)):
        if name in seen or name not in py_func.__globals__:
            continue
        seen.add(name)
        value = py_func.__globals__[name]
        inner = kernel_function(value)
        if isinstance(value, pytypes.ModuleType):
            header.append(f"import {value.__name__} as {name}")
        elif isinstance(value, (bool, int, float)):
            header.append(f"{name} = {value!r}")
        elif getattr(numba, name, None) is value:
            header.append(f"from numba import {name}")
        elif inner is not value and inspect.isfunction(inner):
            header.append(kernel_source(inner, seen))
            header.append(f"{name} = cuda.jit(device=True)({inner.__name__})")
        else:
            raise CannotAttribute(f"{py_func.__name__} uses the global `{name}` ({type(value).__name__}), "
                                  "which the static counter cannot carry to the compiler")
    return "\n".join(header + [own])


def _compiler(request: dict[str, Any]) -> tuple[Any, tuple[int, ...]]:
    """The real ``numba.cuda`` and ``request["cc"]``, in the subprocess :mod:`..other_backend` runs with it (no GPU,
    no driver: device functions are compiled for that compute capability)."""
    from numba import cuda  # the real compiler: this runs in the subprocess that has it
    from numba.cuda import dispatcher
    cc = tuple(request["cc"])
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=cc)
    return cuda, cc


def compile_request(request: dict[str, Any]) -> str:
    """Compile ``request["source"]``'s function ``request["name"]`` to PTX (run by :mod:`..other_backend`)."""
    cuda, cc = _compiler(request)
    namespace: dict[str, Any] = {"cuda": cuda}
    exec(compile(request["source"], f"<kernel {request['name']}>", "exec"), namespace)
    sig = tuple(ArgType(**a).to_numba() for a in request["argtypes"])
    return str(cuda.compile_ptx(namespace[request["name"]], sig, cc=cc)[0])


def compile_shapes(request: dict[str, Any], make: Callable[..., Any], signature: tuple[Any, ...]) -> dict[str, str]:
    """PTX of ``make(*shape)`` for each of ``request["shapes"]`` (keyed by the shape as JSON) for ``signature``:
    what a lesson's ``compile_request`` returns, run by :mod:`..other_backend` under the real ``numba.cuda``."""
    cuda, cc = _compiler(request)

    def ptx(kernel: Any) -> str:  # with the kernel's launch bounds, where it has them
        bounds = getattr(kernel, "targetoptions", {}).get("launch_bounds")
        return cuda.compile_ptx(kernel_function(kernel), signature, cc=cc, launch_bounds=bounds)[0]

    return {json.dumps(shape): ptx(make(*shape)) for shape in request["shapes"]}


def cache_dir() -> str:
    """Where compiled PTX is kept between runs (under ``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "three-kernels-or-one", "ptx")


def cached(path: str | Path, make: Callable[[], str]) -> str:
    """The text kept at ``path``; the first time, ``make()``'s, written there whole (another process may race)."""
    path = Path(path)
    if path.exists():
        return path.read_text()
    text = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return text


@lru_cache(maxsize=256)
def _compile_in_subprocess(source: str, name: str, argtypes: tuple[ArgType, ...], cc: tuple[int, int]) -> str:
    import numba_cuda  # noqa: F401  (its version is part of the cache key)
    request = {"source": source, "name": name, "argtypes": [a.__dict__ for a in argtypes], "cc": list(cc)}
    key = hashlib.sha256((json.dumps(request, sort_keys=True) + getattr(numba_cuda, "__version__", "")).encode())

    def compiled() -> str:
        try:
            return str(run_under(COMPILER, "helpers.counting.ptx:compile_request", request, timeout=300))
        except OtherBackendError as exc:
            raise CannotAttribute(f"compiling {name} to PTX failed: {exc}") from exc

    return cached(os.path.join(cache_dir(), key.hexdigest() + ".ptx"), compiled)


def compile_ptx(kernel: Any, argtypes: Sequence[ArgType], cc: tuple[int, int] | None = None) -> str:
    """PTX for ``kernel`` (a ``@cuda.jit`` kernel or a plain function) and these argument types."""
    py_func = kernel_function(kernel)
    cc = cc or compute_capability()
    if is_simulator():
        return _compile_in_subprocess(kernel_source(py_func), py_func.__name__, tuple(argtypes), tuple(cc))
    from numba import cuda  # on a GPU: numba.cuda is the real compiler here

    try:
        ptx, _ = cuda.compile_ptx(py_func, tuple(a.to_numba() for a in argtypes), cc=cc)
    except Exception as exc:  # a typing or lowering error: the same words as the subprocess path gives
        raise CannotAttribute(f"compiling {py_func.__name__} to PTX failed: {error_detail(exc)}") from exc
    return ptx
