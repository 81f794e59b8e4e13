"""Start and stop a JupyterLab server for the tests that use the series as a person would.

Used by ``tests/test_browser.py`` (JupyterLab driven by a headless Chromium) and
``tests/test_readme.py`` (``make lab`` in a fresh clone).  The server listens on a
free loopback port with a random token; stopping it ends only the process group
that was started for it.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def new_token() -> str:
    return secrets.token_hex(16)


def isolated_jupyter_env(home: Path) -> dict[str, str]:
    """The environment for a server whose config, runtime files and settings live under ``home``.

    Settings switch off JupyterLab's news and update checks (no network here) and
    render every cell of a notebook, so that tests and screenshots see all of them.
    """
    env = dict(os.environ)
    dirs = {
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": home / "settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / "workspaces",
        "IPYTHONDIR": home / "ipython",
    }
    for name, folder in dirs.items():
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    settings = dirs["JUPYTERLAB_SETTINGS_DIR"]
    _write_settings(settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings",
                    {"fetchNews": "false", "checkForUpdates": False})
    _write_settings(settings / "@jupyterlab/notebook-extension/tracker.jupyterlab-settings",
                    {"windowingMode": "none"})
    env.pop("JUPYTER_TOKEN", None)
    return env


def _write_settings(path: Path, values: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))


@dataclass
class LabServer:
    """A running JupyterLab: its process, address and token."""

    process: subprocess.Popen
    port: int
    token: str
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """``path`` on this server with the token attached."""
        joiner = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{joiner}token={self.token}"

    def get(self, path: str, timeout: float = 10) -> tuple[int, bytes]:
        """HTTP GET; returns (status, body) and never raises on HTTP errors."""
        return _request("GET", self.url(path), timeout)

    def api(self, method: str, path: str, timeout: float = 10) -> Any:
        """Call the REST API and decode its JSON (``None`` for an empty body)."""
        status, body = _request(method, self.url(path), timeout)
        if status >= 400:
            raise RuntimeError(f"{method} {path} answered HTTP {status}: {body[:300]!r}")
        return json.loads(body) if body else None

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def wait_until_serving(self, timeout: float = 180) -> None:
        """Poll ``/api/status`` until the server answers; fail with its log if it dies or stalls."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with code {self.process.returncode}:\n{self.log_tail()}")
            try:
                if self.get("/api/status", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def shutdown_kernels(self) -> None:
        """End every kernel session the browser started (between notebooks)."""
        for session in self.api("GET", "/api/sessions") or []:
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def stop(self, timeout: float = 30) -> None:
        """Stop the server and everything it started (kernels), by its process group id."""
        if self.process.poll() is not None:
            return
        group = self.process.pid  # started with start_new_session=True: the group id is its pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=timeout)
                return
            except subprocess.TimeoutExpired:
                continue


def _request(method: str, url: str, timeout: float) -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def start_lab(command: Sequence[str], *, port: int, token: str, cwd: Path, env: dict[str, str], log: Path) -> LabServer:
    """Start ``command`` (a JupyterLab launch) in its own process group, logging to ``log``."""
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            list(command), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return LabServer(process=process, port=port, token=token, log=log)
