"""Carry a kernel to a simulator subprocess (the dynamic count on a GPU): its source and every global it uses.

:func:`function_spec` describes each global as data and :func:`build_function` rebuilds it there: a module by name;
a number, string, ``None`` or NumPy scalar by value; an object an importable module holds, imported again from it
*under the simulator* (roofline's ``load4`` becomes its Python stand-in); a notebook's device function as source.
Anything else is refused, naming the global, before the subprocess starts.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import sys
import types as pytypes
from pathlib import Path
from typing import Any

import numpy as np

from ..validate import kernel_function
from .ptx.compile import function_source, global_names
from .record import CannotAttribute

_CONSTANTS = (bool, int, float, str, type(None))
_WELL_KNOWN = ("numba", "numpy", "math")  # where a bare name such as float32 is looked up last


def function_spec(py_func: Any, _stack: tuple[Any, ...] = ()) -> dict[str, Any]:
    """``py_func`` as data a simulator subprocess can rebuild: ``{"name", "source", "globals", "paths"}``, ``paths``
    the folders it must add to ``sys.path`` (a test module's, say); :class:`CannotAttribute` for what cannot travel."""
    name = py_func.__name__
    if py_func in _stack:
        raise CannotAttribute(f"{_stack[0].__name__} calls the device function {name} recursively, "
                              "which the simulator count does not carry")
    source = function_source(py_func)
    carried: dict[str, Any] = {}
    paths: list[str] = []
    for global_name, value in _names_used(py_func, _stack or (py_func,)):
        how = _carry(global_name, value, py_func, _stack + (py_func,))
        paths += [path for path in how.pop("paths", []) if path not in paths]
        carried[global_name] = how
    return {"name": name, "source": source, "globals": carried, "paths": paths}


def _names_used(py_func: Any, stack: tuple[Any, ...]) -> list[tuple[str, Any]]:
    """(name, value) of every global the function reads and every value its closure captured."""
    found = []
    for name in sorted(global_names(py_func.__code__)):
        if name in py_func.__globals__:
            found.append((name, py_func.__globals__[name]))
        elif not hasattr(builtins, name):
            raise CannotAttribute(f"{stack[0].__name__} uses the name `{name}`, which is not defined "
                                  f"where {py_func.__name__} is defined")
    for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__ or ()):
        try:
            found.append((name, cell.cell_contents))
        except ValueError:  # a cell not yet filled: the factory had not assigned it
            raise CannotAttribute(f"{py_func.__name__} uses `{name}` before its factory assigned it") from None
    return found


def _carry(name: str, value: Any, owner: Any, stack: tuple[Any, ...]) -> dict[str, Any]:
    """How one global travels: ``{"module"}``, ``{"value"[, "dtype"]}``, ``{"import", "paths"}`` or ``{"device"}``."""
    if isinstance(value, pytypes.ModuleType):
        return {"module": value.__name__}
    if type(value) in _CONSTANTS:
        return {"value": value}
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"value": value.item(), "dtype": value.dtype.name}
    home = _importable_home(name, value, owner)
    if home is not None:
        where, root = home
        return {"import": where, "paths": [root] if root else []}
    inner = kernel_function(value)
    if inner is not value and inspect.isfunction(inner):
        spec = function_spec(inner, stack)
        return {"device": spec, "paths": spec.pop("paths")}
    module = getattr(owner, "__module__", None)
    where = "a notebook (__main__)" if module in (None, "__main__") else f"{module}, which cannot be imported by name"
    raise CannotAttribute(
        f"{stack[0].__name__} uses the global `{name}` (a {type(value).__name__} from {where}), which the "
        "simulator count cannot carry to its subprocess: pass it to the kernel as an argument, or define it "
        "in a module the kernel imports"
    )


def _importable_home(name: str, value: Any, owner: Any) -> tuple[str, str] | None:
    """``("module:attribute", sys.path folder)`` of an importable module that holds ``value``, else None."""
    qualname = getattr(value, "__qualname__", None)
    candidates = [(owner.__module__, name), (getattr(value, "__module__", None), name)]
    if isinstance(qualname, str) and "<locals>" not in qualname:
        candidates.append((getattr(value, "__module__", None), qualname))
    candidates += [(module, name) for module in _WELL_KNOWN]
    for module_name, attribute in candidates:
        if not isinstance(module_name, str) or module_name not in sys.modules:
            continue
        root = _import_root(module_name) if _lookup(sys.modules[module_name], attribute) is value else None
        if root is not None:
            return f"{module_name}:{attribute}", root
    return None


def _lookup(module: Any, dotted: str) -> Any:
    """``module.<dotted>``, or :data:`_MISSING` (which has no attributes, so it stays missing)."""
    for part in dotted.split("."):
        module = getattr(module, part, _MISSING)
    return module


_MISSING = object()


def _import_root(module_name: str) -> str | None:
    """The ``sys.path`` folder a fresh process needs to import ``module_name`` ("": any), or None if it cannot."""
    if module_name == "__main__":
        return None
    if module_name in sys.builtin_module_names:
        return ""
    file = getattr(sys.modules.get(module_name), "__file__", None)
    if not file or not Path(file).is_file():
        return None
    path = Path(file).resolve()
    parts = module_name.split(".")
    stem = path.name.split(".")[0]
    folder = path.parent if stem == "__init__" else path.parent / stem
    if folder.parts[-len(parts):] != tuple(parts):  # loaded under a name its file does not have
        return None
    return str(folder.parents[len(parts) - 1])


def build_function(spec: dict[str, Any], cuda: Any) -> Any:
    """The Python function ``spec`` describes, its globals rebuilt here (run in the simulator subprocess)."""
    sys.path += [path for path in spec.get("paths", []) if path not in sys.path]  # function_spec lists each once
    namespace: dict[str, Any] = {"cuda": cuda}
    namespace.update({name: _rebuild(name, how, spec["name"], cuda) for name, how in spec["globals"].items()})
    exec(compile(spec["source"], f"<kernel {spec['name']}>", "exec"), namespace)  # noqa: S102 - the caller's kernel
    return namespace[spec["name"]]


def _rebuild(name: str, how: dict[str, Any], kernel: str, cuda: Any) -> Any:
    if "module" in how:
        return importlib.import_module(how["module"])
    if "value" in how:
        return np.dtype(how["dtype"]).type(how["value"]) if "dtype" in how else how["value"]
    if "device" in how:
        return cuda.jit(device=True)(build_function(how["device"], cuda))
    module_name, _, attribute = how["import"].partition(":")
    why = ""
    try:
        found = _lookup(importlib.import_module(module_name), attribute)
    except ImportError as exc:
        found, why = _MISSING, f"({type(exc).__name__}: {exc})"
    if found is _MISSING:
        raise CannotAttribute(f"{kernel} uses `{name}` ({module_name}.{attribute}), which does not exist "
                              f"under the simulator {why}".rstrip())
    return found
