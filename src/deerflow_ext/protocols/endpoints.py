"""The routes the Gateway mounts for the agent protocols, each protocol loaded on first use.

Importing the MCP SDK costs a Gateway process about 22 MiB and the A2A SDK about 10 MiB
(measured: ``ru_maxrss`` after the import, 2026-12), plus their import time at every start;
a Gateway nobody calls over these protocols should pay neither. So the routes here are thin:
the first request to ``/api/mcp`` imports ``mcp.py`` and starts its session manager (in a
task of its own, which ends with the Gateway's lifespan), the first to ``/api/a2a/...`` or
the agent card imports ``a2a.py``. Each import runs in a worker thread, so it does not stall
the event loop; both modules sit below this one (the ``TYPE_CHECKING`` imports name them, so
the layering contract sees the edges).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .runs import ServedRuns

if TYPE_CHECKING:
    from .a2a import A2aEndpoint
    from .mcp import McpEndpoint

__all__ = ["ProtocolEndpoints"]

_NOT_SERVING = "the Gateway is not serving (starting up or shutting down)"


async def _imported(protocol: str) -> Any:
    """``protocols.<protocol>``, imported in a worker thread: an SDK's import takes from a
    fraction of a second to seconds on a loaded machine, which on the event loop would
    stall every run the process serves (the loop watchdog saw 3 s)."""
    return await asyncio.to_thread(importlib.import_module, f"{__package__}.{protocol}")


class _Asgi:
    """An ASGI app around a bound method: given a method, Starlette's ``Route`` would call it
    with a ``Request``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class ProtocolEndpoints:
    """``/api/mcp`` (unless ``mcp`` is False), ``/api/a2a/{assistant_id}`` and the agent card
    (unless ``a2a`` is False); they answer while :meth:`serving` is entered."""

    def __init__(self, runs: ServedRuns, *, version: str, max_body_bytes: int, mcp: bool, a2a: bool) -> None:
        self._runs = runs
        self._version = version
        self._max_body_bytes = max_body_bytes
        self._mcp_enabled = mcp
        self._a2a_enabled = a2a
        self._a2a: A2aEndpoint | None = None
        self._mcp: McpEndpoint | None = None
        self._mcp_task: asyncio.Task[None] | None = None
        self._mcp_lock: asyncio.Lock | None = None
        self._closing: asyncio.Event | None = None

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = []
        if self._mcp_enabled:
            routes.append(
                Route("/api/mcp", _Asgi(self._serve_mcp), methods=["GET", "POST", "DELETE"], include_in_schema=False)
            )
        if self._a2a_enabled:
            routes += [
                Route("/api/a2a/{assistant_id}", self._serve_a2a, methods=["POST"], include_in_schema=False),
                Route("/api/.well-known/agent-card.json", self._serve_card, methods=["GET"], include_in_schema=False),
            ]
        return routes

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        self._closing, self._mcp_lock = asyncio.Event(), asyncio.Lock()  # this lifespan's loop
        try:
            yield
        finally:
            closing, self._closing = self._closing, None
            closing.set()
            task, self._mcp_task, self._mcp = self._mcp_task, None, None
            if task is not None:
                await task

    # -- A2A ---------------------------------------------------------------------------
    async def _a2a_endpoint(self) -> A2aEndpoint:
        if self._a2a is None:
            module = await _imported("a2a")
            self._a2a = module.A2aEndpoint(self._runs, version=self._version)
        return self._a2a

    async def _serve_a2a(self, request: Request) -> Response:
        return await (await self._a2a_endpoint()).rpc(request)

    async def _serve_card(self, request: Request) -> Response:
        return await (await self._a2a_endpoint()).card(request)

    # -- MCP ---------------------------------------------------------------------------
    async def _serve_mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self._mcp or await self._start_mcp()
        if endpoint is None:
            await JSONResponse({"detail": _NOT_SERVING}, 503)(scope, receive, send)
            return
        await endpoint(scope, receive, send)

    async def _start_mcp(self) -> McpEndpoint | None:
        if self._mcp_lock is None:
            return None
        async with self._mcp_lock:
            if self._mcp is not None or self._closing is None:
                return self._mcp
            module = await _imported("mcp")
            endpoint: McpEndpoint = module.McpEndpoint(
                self._runs, name="deerflow-ext", version=self._version, max_body_bytes=self._max_body_bytes
            )
            started = asyncio.Event()
            task = asyncio.get_running_loop().create_task(self._run_mcp(endpoint, started, self._closing))
            waiting = asyncio.ensure_future(started.wait())
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not started.is_set():
                waiting.cancel()
                task.result()  # it failed to start: its error is this request's
            self._mcp, self._mcp_task = endpoint, task
            return endpoint

    @staticmethod
    async def _run_mcp(endpoint: McpEndpoint, started: asyncio.Event, closing: asyncio.Event) -> None:
        """The MCP session manager's task group lives in this task, from the first request
        to the end of the Gateway's lifespan (a task group is left in the task it was entered in)."""
        async with endpoint.serving():
            started.set()
            await closing.wait()
