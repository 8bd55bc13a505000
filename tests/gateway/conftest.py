"""Gateway suite fixtures: a real uvicorn on 127.0.0.1 with a free port (``database_url``, a
database per test, is the whole suite's: ``tests/conftest.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gw_fixtures
import httpx
import pytest


@pytest.fixture(autouse=True)
def _clear_events() -> Iterator[None]:
    gw_fixtures.EVENTS.clear()
    yield
    gw_fixtures.EVENTS.clear()


@pytest.fixture
def settings_for(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    from deerflow_ext.config.settings import Settings

    monkeypatch.chdir(tmp_path)

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"config": tmp_path / "config.yaml", "database_url": database_url}
        values.update(overrides)
        return Settings(**values)

    return make


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LiveServer:
    app: Any
    base_url: str
    server: Any
    task: asyncio.Task[Any]

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, timeout=30, **kwargs)

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 30)


@contextlib.asynccontextmanager
async def live_server(app: Any) -> AsyncIterator[LiveServer]:
    """uvicorn serving ``app`` on 127.0.0.1 in this event loop, lifespan included."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning"))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    for _ in range(300):
        if server.started or task.done():
            break
        await asyncio.sleep(0.02)
    if not server.started:
        if task.done():
            task.result()
        raise RuntimeError("uvicorn did not start")
    live = LiveServer(app, f"http://127.0.0.1:{port}", server, task)
    try:
        yield live
    finally:
        if not task.done():
            await live.stop()


async def read_sse(response: httpx.Response) -> list[tuple[str, Any, float]]:
    """(event, data, monotonic arrival time) for each SSE event of ``response``."""
    import json
    import time

    events: list[tuple[str, Any, float]] = []
    name, data = None, []
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line == "" and name is not None:
            events.append((name, json.loads("\n".join(data)), time.monotonic()))
            name, data = None, []
    return events
