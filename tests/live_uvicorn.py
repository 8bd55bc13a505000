"""A real uvicorn serving an ASGI app on loopback inside the test's own event loop: what the
in-process Gateway tests, the reliability tests, the HTTP deadline tests and the adapter
tests all start; and the free loopback port every suite that starts a server asks for."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
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
        kwargs.setdefault("timeout", 30)
        return httpx.AsyncClient(base_url=self.base_url, **kwargs)

    async def stop(self, within: float = 30) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(asyncio.shield(self.task), within)


@contextlib.asynccontextmanager
async def live_server(app: Any, *, start_timeout: float = 30.0, **config: Any) -> AsyncIterator[LiveServer]:
    """uvicorn serving ``app`` on 127.0.0.1 in this event loop, lifespan included unless
    ``config`` (more of ``uvicorn.Config``'s keywords) says otherwise; a server that has not
    started within ``start_timeout`` is stopped and the test told why."""
    port = free_port()
    options: dict[str, Any] = {"lifespan": "on", "log_level": "warning", **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **options))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + start_timeout
    while not (server.started or task.done()) and time.monotonic() < deadline:  # noqa: ASYNC110 - uvicorn exposes a flag
        await asyncio.sleep(0.02)
    if not server.started:
        if task.done():
            task.result()
        server.should_exit = server.force_exit = True
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 5)
        raise TimeoutError(f"uvicorn did not start within {start_timeout}s")
    live = LiveServer(app, f"http://127.0.0.1:{port}", server, task)
    try:
        yield live
    finally:
        if not task.done():
            await live.stop()
