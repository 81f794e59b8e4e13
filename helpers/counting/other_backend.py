"""Run one function under the other CUDA backend, in a short-lived subprocess.

Numba chooses its backend (the simulator or the real compiler) once, at import: compiling to PTX in the simulator
and counting in the simulator on a GPU need the other.  A helpers function (``"module:function"``) is called with a
JSON dict; its JSON result comes back, or an :class:`OtherBackendError` with its exception's type and message.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

SIMULATOR = "simulator"
COMPILER = "compiler"
_ROOT = str(Path(__file__).resolve().parents[2])


class OtherBackendError(RuntimeError):
    """The function failed under the other backend (the message is its own error); ``kind`` names the exception's
    class there (``"IndexError"``, say), so a caller can raise the same kind here."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


def run_under(backend: str, entry: str, request: dict[str, Any], timeout: float = 600) -> Any:
    """``entry(request)`` with Numba's simulator (``"simulator"``) or real CUDA (``"compiler"``)."""
    if backend not in (SIMULATOR, COMPILER):
        raise ValueError(f"backend must be {SIMULATOR!r} or {COMPILER!r}, got {backend!r}")
    if ":" not in entry or not entry.startswith("helpers."):
        raise ValueError(f"entry must name a helpers function as 'helpers.module:function', got {entry!r}")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1" if backend == SIMULATOR else "0",
               PYTHONPATH=os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH", "")) if p))
    try:
        done = subprocess.run([sys.executable, "-m", "helpers.counting.other_backend"],
                              input=json.dumps({"entry": entry, "request": request}),
                              capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise OtherBackendError(f"{entry} took longer than {timeout:g} s under the {backend}") from exc
    try:
        reply: dict[str, Any] | None = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        reply = None
    if reply is None or "result" not in reply:
        error = (reply or {}).get("error") or _last_error(done.stderr) or f"exit status {done.returncode}"
        raise OtherBackendError(error, (reply or {}).get("kind", ""))
    return reply["result"]


def error_detail(exc: BaseException) -> str:
    """An exception as one line, ``module.Kind: message``, as a subprocess reports it."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip().replace("\n", " ")


def _last_error(stderr: str) -> str:
    """The exception line(s) at the end of a traceback (a message may span several lines)."""
    lines = stderr.strip().splitlines()
    start = max((i for i, ln in enumerate(lines) if ln.startswith("  File ")), default=-1)
    tail = [ln for ln in lines[start + 1 :] if ln.strip() and not ln.startswith("    ")]
    return " ".join(tail or lines[-1:]).strip()


def _serve() -> None:
    message = json.load(sys.stdin)
    module_name, _, func_name = message["entry"].partition(":")
    try:
        import helpers  # noqa: F401  (chooses the backend from NUMBA_ENABLE_CUDASIM before numba loads)
        func = getattr(importlib.import_module(module_name), func_name)
        result = func(message["request"])
    except BaseException as exc:  # every failure goes back as a message, never as a bare exit status
        sys.stderr.write(traceback.format_exc())
        sys.stdout.write("\n" + json.dumps({"error": error_detail(exc), "kind": type(exc).__name__}) + "\n")
        sys.exit(1)
    sys.stdout.write("\n" + json.dumps({"result": result}) + "\n")


if __name__ == "__main__":
    _serve()
