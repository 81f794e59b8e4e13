"""Measured results: typed records, where they were measured, and reading them back.

Every measurement run in :mod:`helpers.lessons` returns a *record*: a dataclass that
subclasses :class:`Record`, names its file (``SCHEMA``) and its layout's version
(``VERSION``).  :func:`save` writes it as ``results/<device>/<SCHEMA>.json`` with a
:class:`Provenance` (device, driver, library versions, date); :func:`load` reads it
back into the same dataclass, so a notebook writes ``sweep.settings.sizes``, never
``result["settings"]["sizes"]``.  A file written by another version of the code, or
not by this project at all, gets a :class:`ResultError` naming the file and the field.

:func:`load_or_measure` is the one way a lesson gets its numbers: the committed
H200 result by default (and always in the simulator), or a fresh measurement on
the reader's GPU when asked; either way it prints where the numbers come from.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import platform
import re
import types
import typing
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence, TypeVar

import numpy as np

from .backend import is_simulator
from .device import compute_capability, device_name, sm_count

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = (_PACKAGE.parent / "pyproject.toml").is_file()  # helpers/ inside the repository (an editable install too)
RESULTS_DIR = _PACKAGE.parent / "results" if _CHECKOUT else _PACKAGE / "_results"
"""Where the committed results are read from: the repository's ``results/``, or, when the project
was installed from a wheel (``pip install git+...``, Colab), the copy of ``results/h200`` that
the wheel carries as ``helpers/_results/h200`` (setup.py)."""
COMMITTED = "h200"  # the folder of the results committed with the notebooks
PACKAGES = ("numba", "numba-cuda", "numpy", "cupy-cuda13x", "cupy-cuda12x", "torch", "triton")

R = TypeVar("R", bound="Record")


class ResultError(ValueError):
    """A result file that is missing, or that does not match the record it should hold."""


def package_version(package: str) -> str | None:
    """The installed version of ``package``, or ``None``."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def driver_version() -> str | None:
    """The CUDA driver version as ``major.minor``, or ``None`` in the simulator."""
    if is_simulator():
        return None
    from numba import cuda

    major, minor = cuda.cudadrv.driver.driver.get_version()
    return f"{major}.{minor}"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Where and when a number was measured, and with which software."""

    backend: str
    device: str
    sm_count: int | None
    compute_capability: list[int] | None
    cuda_driver: str | None
    python: str
    versions: dict[str, str | None]
    date: str
    cpu: str | None = None

    @classmethod
    def here(cls) -> Provenance:
        """This process's machine and software, now."""
        return cls(
            backend="simulator" if is_simulator() else "gpu",
            device=device_name(),
            sm_count=sm_count(),
            compute_capability=None if is_simulator() else list(compute_capability()),
            cuda_driver=driver_version(),
            python=platform.python_version(),
            versions={p: package_version(p) for p in PACKAGES},
            date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            cpu=_cpu(),
        )

    def describe(self, *, peers: bool = False) -> str:
        """One line, e.g. ``NVIDIA H200, driver 13.0, numba 0.68.0, numba-cuda 0.30.4, 2026-12-02``.

        ``peers=True`` adds the versions of CuPy, torch and Triton and the host CPU.
        """
        v = self.versions
        parts = [self.device]
        if self.cuda_driver:
            parts.append(f"driver {self.cuda_driver}")
        parts += [f"numba {v.get('numba')}", f"numba-cuda {v.get('numba-cuda')}"]
        if peers:
            cupy = v.get("cupy-cuda13x") or v.get("cupy-cuda12x")
            parts += [f"{name} {v[key] if key != 'cupy' else cupy}" for name, key in
                      (("cupy", "cupy"), ("torch", "torch"), ("triton", "triton"))
                      if (cupy if key == "cupy" else v.get(key))]
            if self.cpu:
                parts.append(f"CPU {self.cpu}")
        parts.append(self.date[:10])
        return ", ".join(parts)


@dataclasses.dataclass(kw_only=True)
class Record:
    """Base of every result record: a subclass names its file and layout, ``class Sweep(Record, schema="bench_sweep",
    version=2)`` (its ``SCHEMA`` and ``VERSION``), and adds fields."""

    SCHEMA: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    provenance: Provenance | None = None

    def __init_subclass__(cls, schema: str = "", version: int = 0, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.SCHEMA, cls.VERSION = schema or cls.SCHEMA, version or cls.VERSION


@dataclasses.dataclass
class Claim:
    """A statement about this GPU that the sweep checks, and whether the measurement bears it out."""

    claim: str
    measured: float | None
    expected: str
    holds: bool | None  # None: not measured (or not comparable)
    note: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.holds, np.bool_):
            self.holds = bool(self.holds)  # a comparison of NumPy numbers
        if self.holds is not None and not isinstance(self.holds, bool):
            raise TypeError(f"`holds` must be True, False or None (not measured), got {self.holds!r} "
                            f"({type(self.holds).__name__}); write e.g. `holds=ratio >= 2`")

    def line(self) -> str:
        """E.g. ``fused is >= 2x faster than three kernels at 2^28: yes, 2.27x``."""
        if self.holds is None:
            return f"{self.claim}: not checked ({self.note or 'not measured'})"
        verdict = "yes" if self.holds else "no"
        return f"{self.claim}: {verdict}, {self.note}" if self.note else f"{self.claim}: {verdict}"


def folder_for(provenance: Provenance) -> Path:
    """``results/h200`` for an H200, ``results/simulator`` in the simulator, else ``results/gpu``.

    In the repository, under its ``results/``; installed from a wheel, under ``results/`` in the
    current folder (never inside the installed package).
    """
    base = RESULTS_DIR if _CHECKOUT else Path.cwd() / "results"
    if provenance.backend == "simulator":
        return base / "simulator"
    return base / ("h200" if "H200" in provenance.device else "gpu")


def _folder(folder: str | os.PathLike[str] | None) -> Path | None:
    """``folder`` as a :class:`~pathlib.Path` (a ``str`` is fine), or ``None``; else a ``TypeError``."""
    if folder is None:
        return None
    if isinstance(folder, (str, os.PathLike)):
        return Path(folder)
    raise TypeError(f"`folder` must be a path (a str or a pathlib.Path) such as 'results/h200', "
                    f"got {type(folder).__name__}")


def _record_class(cls: Any) -> type[Record]:
    """``cls`` if it is a record class with a file of its own; else a ``TypeError`` naming what to pass."""
    if isinstance(cls, type) and issubclass(cls, Record) and cls.SCHEMA:
        return cls
    if cls is Record:
        what = "Record itself, the base class of the records"
    elif isinstance(cls, type):
        what = f"the class {cls.__name__}, which is not a result record"
    else:
        what = f"{cls!r} ({type(cls).__name__})"
    raise TypeError(f"expected a result record class (a Record subclass with a SCHEMA, such as Sweep), "
                    f"got {what}; pass the class itself, e.g. `results.load(Sweep)`")


def path_of(cls: type[Record], folder: str | os.PathLike[str] | None = None) -> Path:
    """Where ``cls``'s committed result lives (the H200's by default)."""
    cls = _record_class(cls)
    return (_folder(folder) or RESULTS_DIR / COMMITTED) / f"{cls.SCHEMA}.json"


NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""How a result file writes the floats that standard JSON has no token for (read back in float fields)."""


def _json_ready(value: Any, where: str) -> Any:
    """``value`` with NumPy scalars made Python numbers and NaN/inf spelled as strings; names a field JSON cannot hold."""
    if isinstance(value, dict):
        keys = [k.item() if isinstance(k, np.generic) else k for k in value]
        return {k: _json_ready(v, _join(where, k) if isinstance(k, str) else f"{where}[{k!r}]")
                for k, v in zip(keys, value.values())}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.generic) and not isinstance(value, (np.void, np.datetime64, np.timedelta64)):
        value = value.item()  # np.float32(1.5) -> 1.5, np.int64(3) -> 3, np.bool_ -> bool
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    hint = " (store value.tolist())" if isinstance(value, np.ndarray) else ""
    raise TypeError(f"field '{where or '(top level)'}' holds a {type(value).__name__}, which a result file "
                    f"cannot hold: store numbers, strings, lists or dicts{hint}")


def to_json(record: Record) -> dict[str, Any]:
    """The JSON-ready form of ``record``: its fields plus ``schema`` and ``version``.

    NumPy scalars become Python numbers, and NaN and infinities, which standard JSON has
    no token for, become the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (read
    back as floats in ``float`` fields; an untyped (``Any``) field keeps the string).
    """
    data = {"schema": record.SCHEMA, "version": record.VERSION, **dataclasses.asdict(record)}
    return _json_ready(data, "")  # type: ignore[no-any-return]


def save(record: Record, folder: str | os.PathLike[str] | None = None) -> Path:
    """Stamp ``record`` with this machine's provenance (if unset) and write it; returns the path.

    The record is checked first, the way :func:`load` will read it, so a field of the wrong
    type is named here and no file is written that :func:`load` would refuse.
    """
    if not isinstance(record, Record) or not record.SCHEMA:
        raise TypeError(f"save() takes a result record (a Record subclass with a SCHEMA), not {type(record).__name__}")
    folder = _folder(folder)
    if record.provenance is None:
        record.provenance = Provenance.here()
    text = json.dumps(to_json(record), indent=1, allow_nan=False) + "\n"
    from_json(type(record), json.loads(text), source=f"{type(record).__name__} (not saved)")
    folder = folder or folder_for(record.provenance)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record.SCHEMA}.json"
    path.write_text(text)
    return path


def load(cls: type[R], folder: str | os.PathLike[str] | None = None) -> R:
    """Read the committed ``cls`` result (the H200's by default) back into a ``cls``.

    ``folder`` may be a ``str`` or a ``Path``.  (Files written before NaN was spelled
    ``"NaN"`` hold the bare token ``NaN``; Python's reader takes both.)
    """
    path = path_of(cls, folder)
    if not path.exists():
        raise ResultError(f"{path}: no such result; the lessons' measurement runs (`python -m helpers.lessons.<topic>...`) on a GPU write it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise ResultError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}); "
                          "a result file is JSON written by `helpers.results.save`") from None
    except json.JSONDecodeError as error:
        raise ResultError(f"{path}: not JSON ({error})") from None
    return from_json(cls, data, source=str(path))


def from_json(cls: type[R], data: Any, *, source: str = "<data>") -> R:
    """Build a ``cls`` from its JSON form, checking schema, version and every field."""
    cls = _record_class(cls)  # type: ignore[assignment]
    if not isinstance(data, dict):
        raise ResultError(f"{source}: expected a JSON object holding a {cls.SCHEMA} result")
    schema, version = data.get("schema"), data.get("version")
    if schema != cls.SCHEMA:
        raise ResultError(f"{source}: field 'schema' is {schema!r}, not {cls.SCHEMA!r}: this file holds another result")
    if isinstance(version, int) and not isinstance(version, bool) and version > cls.VERSION:
        raise ResultError(
            f"{source}: field 'version' is {version}, newer than the {cls.SCHEMA} version {cls.VERSION} this code "
            "reads: it was written by a newer copy of the project; update this one (git pull)"
        )
    if version != cls.VERSION or isinstance(version, bool):
        raise ResultError(
            f"{source}: field 'version' is {version!r}, but this code reads {cls.SCHEMA} version {cls.VERSION}; "
            "re-run the measurement to write it anew"
        )
    body = {k: v for k, v in data.items() if k not in ("schema", "version")}
    return _build(cls, body, source, "")


_NONE = type(None)


def _build(kind: Any, value: Any, source: str, where: str) -> Any:
    """Convert JSON ``value`` into ``kind`` (a dataclass, list, dict, union or scalar type)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    here = where or "(top level)"
    if kind is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and _NONE in args:
            return None
        errors = []
        for option in (a for a in args if a is not _NONE):
            try:
                return _build(option, value, source, where)
            except ResultError as error:
                errors.append(str(error))
        raise ResultError(errors[0] if errors else f"{source}: field '{here}' is null")
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise ResultError(f"{source}: field '{here}' should be an object ({kind.__name__})")
        hints = typing.get_type_hints(kind)
        fields = {f.name: f for f in dataclasses.fields(kind) if f.init}
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise ResultError(f"{source}: field '{_join(where, unknown[0])}' is not part of {kind.__name__}")
        built = {}
        for name, f in fields.items():
            if name not in value:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise ResultError(f"{source}: field '{_join(where, name)}' is missing ({kind.__name__})")
                continue
            built[name] = _build(hints[name], value[name], source, _join(where, name))
        return kind(**built)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ResultError(f"{source}: field '{here}' should be a list")
        item = args[0] if args else Any
        return [_build(item, v, source, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ResultError(f"{source}: field '{here}' should be an object")
        key_type, item = args if args else (str, Any)
        out = {}
        for k, v in value.items():
            try:
                key = key_type(k)
            except ValueError:
                raise ResultError(f"{source}: field '{where}' has key {k!r}, not a {key_type.__name__}") from None
            out[key] = _build(item, v, source, f"{where}[{k!r}]")
        return out
    return _scalar(kind, value, source, here)


def _scalar(kind: Any, value: Any, source: str, here: str) -> Any:
    """A JSON number, string or boolean checked against ``kind`` (``true`` is no number)."""
    if kind is float:
        if isinstance(value, str) and value in NON_FINITE:
            return NON_FINITE[value]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ResultError(f"{source}: field '{here}' should be a number, not {value!r}")
        return float(value)
    if kind in (int, str, bool):
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ResultError(f"{source}: field '{here}' should be {kind.__name__}, not {value!r}")
        return value
    raise ResultError(f"{source}: field '{here}' has a type the reader does not know ({kind!r})")


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def load_or_measure(cls: type[R], measure: Callable[[], R | None], *, remeasure: bool = False,
                    folder: Path | None = None, peers: bool = False) -> R:
    """The committed ``cls`` result, or, on a GPU with ``remeasure=True``, a fresh one.

    Prints one line saying where the numbers come from: ``committed result: <device,
    driver, versions, date>`` or ``measured now: <device, ...>`` (``peers=True``: with the
    peers' versions and the CPU, for a lesson that times CuPy or torch).  In the simulator
    nothing can be measured, so the committed result is read whatever ``remeasure`` says.
    """
    if remeasure and not is_simulator():
        record = measure()
        if record is None:
            raise ResultError(f"the {cls.SCHEMA} measurement returned nothing")
        if record.provenance is None:
            record.provenance = Provenance.here()
        print(f"measured now: {record.provenance.describe(peers=peers)}")
        return record
    record = load(cls, folder)
    where = record.provenance.describe(peers=peers) if record.provenance else "(no provenance recorded)"
    suffix = " (the simulator cannot time kernels)" if is_simulator() else ""
    print(f"committed result: {where}{suffix}")
    return record


def describe_here(*, peers: bool = False) -> str:
    """Where a live measurement in a notebook is being taken, in one line."""
    return Provenance.here().describe(peers=peers)


class ClaimFailed(AssertionError):
    """A claim a lesson makes that the data it reads does not bear out."""


_VERDICT = re.compile(r": (yes|no)(?:,|$)")


def _verdict(claim: Claim | str) -> bool | None:
    """Whether a claim holds: a :class:`Claim`'s ``holds``, or read back from its line as :meth:`Claim.line` writes
    it (``"...: yes, 2.27x"``); ``None`` for one not checked; a line with no verdict is a measured statement (True)."""
    if isinstance(claim, Claim):
        return claim.holds
    if ": not checked (" in claim:
        return None
    found = _VERDICT.search(claim)
    return True if found is None else found.group(1) == "yes"


def claims_in_brief(claims: Sequence[Claim | str], cited: Sequence[str] = ()) -> list[str]:
    """What a lesson prints of its claims: the line of each one its prose cites (a line starting with one of
    ``cited``, in that order), then one line for all the others: ``N further claims hold on this data``.

    The others are checked, not skipped: if one does not hold, :class:`ClaimFailed` names it. Claims not
    checked (measured on another GPU than the one they were stated for) are counted as such.
    """
    lines = [c.line() if isinstance(c, Claim) else c for c in claims]
    shown = [i for prefix in cited for i, line in enumerate(lines) if line.startswith(prefix)]
    rest = [i for i in range(len(lines)) if i not in shown]
    failed = [lines[i] for i in rest if _verdict(claims[i]) is False]
    if failed:
        raise ClaimFailed(f"{len(failed)} of the claims this lesson makes without printing them "
                          f"{'does' if len(failed) == 1 else 'do'} not hold on this data: " + "; ".join(failed))
    unchecked = sum(_verdict(claims[i]) is None for i in rest)
    held = len(rest) - unchecked
    summary = f"{held} {'further ' if shown else ''}claim{'' if held == 1 else 's'} hold{'s' if held == 1 else ''} on this data"
    return [lines[i] for i in shown] + [summary + (f"; {unchecked} not checked here" if unchecked else "")]
