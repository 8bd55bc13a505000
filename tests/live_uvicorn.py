"""A real uvicorn serving an ASGI app on loopback inside the test's own event loop: what the
in-process Gateway tests, the HTTP deadline tests and the adapter tests all start."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

__all__ = ["LiveServer", "free_port", "live_server"]


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
async def live_server(app: Any, **config: Any) -> AsyncIterator[LiveServer]:
    """uvicorn serving ``app`` on 127.0.0.1 in this event loop, lifespan included unless
    ``config`` (more of ``uvicorn.Config``'s keywords) says otherwise."""
    port = free_port()
    options: dict[str, Any] = {"lifespan": "on", "log_level": "warning", **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **options))
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
