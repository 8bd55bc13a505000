"""A real Gateway for the end-to-end tests: ``deerflow-ext serve`` in a subprocess on loopback.

The Gateway runs on a temporary SQLite database in its own directory, with its stderr kept
for the log lines an operator would read (``example_packages`` installs what it serves).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

__all__ = ["STARTUP_TIMEOUT", "Gateway", "free_port", "serve", "wait"]

STARTUP_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(predicate: Any, timeout: float = 10.0) -> Any:
    """Poll ``predicate`` until it returns something truthy (or time runs out); return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


@dataclass
class Gateway:
    base_url: str
    stderr_path: Path
    database: Path
    process: subprocess.Popen[bytes]

    def log(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=60.0)


@contextlib.contextmanager
def serve(directory: Path, config: Path, env: Mapping[str, str] | None = None) -> Iterator[Gateway]:
    """``deerflow-ext serve --config config`` until it answers ``/health``; SIGINT on exit."""
    database = directory / "deerflow.db"
    port = free_port()
    environment = {
        **os.environ,
        "DEERFLOW_DATABASE_URL": f"sqlite+aiosqlite:///{database.as_posix()}",
        "DEERFLOW_LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    environment.pop("DEERFLOW_CONFIG", None)
    stderr_path = directory / "gateway.stderr"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "deerflow_ext.cli", "serve", "--config", str(config), "--port", str(port)],
            cwd=directory,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    server = Gateway(f"http://127.0.0.1:{port}", stderr_path, database, process)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"the Gateway exited with {process.returncode}:\n{server.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.base_url}/health", timeout=2.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"the Gateway did not answer /health within {STARTUP_TIMEOUT}s:\n{server.log()}")
            time.sleep(0.2)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
