"""Reliability-suite fixtures: a Gateway on a real uvicorn (in this loop, in a thread, or in a
subprocess), SQLite per test, and the fault-injection extension on the import path.

``live_server`` and ``read_sse`` are small copies of ``tests/gateway/conftest.py`` (that
conftest is not importable from here without its package-relative helper imports).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import live_uvicorn
from live_uvicorn import LiveServer, free_port

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def write_config(path: Path, plugins: list[dict[str, Any]], **sections: Any) -> Path:
    data: dict[str, Any] = {"plugins": plugins, "memory": {"enabled": False}}
    data.update(sections)
    path.write_text(yaml.safe_dump(data))
    return path


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'deer-flow' / 'deerflow.db'}"


def make_settings(
    tmp_path: Path, plugins: list[dict[str, Any]], *, database_url: str | None = None, **sections: Any
) -> Any:
    from deerflow_ext.config.settings import Settings

    config = write_config(tmp_path / "config.yaml", plugins, **sections)
    return Settings(config=config, database_url=database_url or sqlite_url(tmp_path))


def live_server(app: Any, *, start_timeout: float = 30.0) -> contextlib.AbstractAsyncContextManager[LiveServer]:
    """The shared live uvicorn (``live_uvicorn``), its shutdown bounded: these Gateways run
    extensions that may hold a request open."""
    return live_uvicorn.live_server(app, start_timeout=start_timeout, timeout_graceful_shutdown=3)


def parse_sse(text: str) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    name, data = None, []
    for line in text.splitlines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line == "" and name is not None:
            events.append((name, json.loads("\n".join(data))))
            name, data = None, []
    return events


def run_body(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"input": {"messages": [{"role": "user", "content": prompt}]}, **extra}


async def stream_run(client: httpx.AsyncClient, thread_id: str, prompt: str, **extra: Any) -> list[tuple[str, Any]]:
    response = await client.post(f"/api/threads/{thread_id}/runs/stream", json=run_body(prompt, **extra))
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


async def new_thread(client: httpx.AsyncClient) -> str:
    response = await client.post("/api/threads", json={})
    assert response.status_code == 200, response.text
    return str(response.json()["thread_id"])


async def wait_run(client: httpx.AsyncClient, thread_id: str, run_id: str, within: float = 15) -> dict[str, Any]:
    """Poll until the run row leaves pending/running."""
    deadline = time.monotonic() + within
    while True:
        row = (await client.get(f"/api/threads/{thread_id}/runs/{run_id}")).json()
        if row["status"] not in ("pending", "running") or time.monotonic() > deadline:
            return dict(row)
        await asyncio.sleep(0.05)


@pytest.fixture(autouse=True)
def _restore_process_state() -> Iterator[None]:
    """create_app publishes process-wide state; put it back so other tests see theirs."""
    from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions, set_loaded_extensions

    extensions = get_loaded_extensions()
    yield
    set_loaded_extensions(extensions)


# -- a Gateway in a background thread (for sync clients: hypothesis, thread soaks) ----------


class ThreadedServer:
    """uvicorn on its own thread and loop; ``url`` is ready when the constructor returns."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, lifespan="on", log_level="warning")
        )
        self.server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.server.run, name="reliability-uvicorn", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("threaded uvicorn did not start")
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


# -- a Gateway in a subprocess (SIGKILL, KeyboardInterrupt) --------------------------------


def subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE)])
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[str]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def start_gateway_process(
    tmp_path: Path,
    *,
    wait: bool = True,
    tag: str = "gw",
    extra_path: Sequence[str] = (),
    extra_env: dict[str, str] | None = None,
) -> GatewayProcess:
    """``deerflow-ext serve`` with ``tmp_path/config.yaml`` and the test's SQLite file;
    ``extra_path`` goes on its ``PYTHONPATH`` (example packages' ``src``, say), ``extra_env``
    into its environment (``DEERFLOW_*`` settings)."""
    port = free_port()
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *extra_path])
    env["DEERFLOW_CONFIG"] = str(tmp_path / "config.yaml")
    env["DEERFLOW_DATABASE_URL"] = sqlite_url(tmp_path)
    env.update(extra_env or {})
    log = tmp_path / f"{tag}-{port}.log"
    handle = log.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "deerflow_ext.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        text=True,
    )
    gw = GatewayProcess(proc, f"http://127.0.0.1:{port}", log)
    if wait:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {proc.returncode}:\n{gw.output()}")
            try:
                if httpx.get(f"{gw.url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                gw.kill()
                raise RuntimeError(f"gateway did not start:\n{gw.output()}")
            time.sleep(0.1)
    return gw


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``deerflow-ext ARGS --config tmp_path/config.yaml`` to completion (a command that must
    not start serving: a config error, a refused extension), with the test's SQLite file."""
    env = {**subprocess_env(), "DEERFLOW_DATABASE_URL": sqlite_url(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "deerflow_ext.cli", *args, "--config", str(tmp_path / "config.yaml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def gateway_processes() -> Iterator[list[GatewayProcess]]:
    """Every subprocess a test starts is SIGKILLed at teardown, whatever happened."""
    procs: list[GatewayProcess] = []
    yield procs
    for gw in procs:
        gw.kill()
