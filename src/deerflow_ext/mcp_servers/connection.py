"""One MCP server, kept connected for the Gateway process's runs.

A :class:`ServerConnection` owns one task, on the Gateway's event loop, that opens the
server's session through ``langchain-mcp-adapters`` (a stdio server: its child process),
loads its tools once (named as the adapter names them: the server's own names), and holds
the session until asked to stop or until the server proves dead. The session's context is
entered and left in that one task, as the SDK's task groups require.

Every tool call goes through :meth:`ServerConnection.guard` (an adapter interceptor): a call
made on another loop (a subagent's worker thread) is carried to the Gateway's loop, where the
session lives; a call past ``call_timeout_seconds``, to a server not running, or that the
transport fails, answers as an MCP tool error (``isError``), which the adapter hands the
model as an error ``ToolMessage``. A transport failure also ends the session: the server is
started again, after the backoff, when a run next asks for tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.interceptors import MCPToolCallRequest, MCPToolCallResult
from langchain_mcp_adapters.sessions import create_session
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp.shared.exceptions import McpError
from mcp.types import CONNECTION_CLOSED, CallToolResult, TextContent

from deerflow_ext.config.schema import McpConfig
from deerflow_ext.exception_text import exception_text

from .origin import mark
from .specs import ServerSpec

__all__ = ["ServerConnection", "State"]

logger = logging.getLogger("deerflow_ext.mcp_servers")

_STOP_SECONDS = 5.0


class State(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"
    STOPPED = "stopped"


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=True)


class ServerConnection:
    """One enabled server of the file; started by :meth:`ensure_started`."""

    def __init__(self, spec: ServerSpec, config: McpConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.spec = spec
        self._config = config
        self._loop = loop
        self.state = State.STOPPED
        self.error: str | None = None
        self.tools: tuple[BaseTool, ...] = ()
        self.failures = 0  # in a row; reset by a start that loads the tools
        self.starts = 0
        self._retry_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._slow_told = False

    # -- lifecycle ---------------------------------------------------------------------
    def ensure_started(self) -> asyncio.Event | None:
        """Start the server unless it runs, is starting, or failed within its backoff; the
        event set when a start is over (loaded or failed), or None when nothing is under way."""
        if self.state in (State.RUNNING,):
            return None
        if self.state is State.STARTING:
            return self._ready
        if self.state is State.FAILED and time.monotonic() < self._retry_at:
            return None
        self.state, self._ready, self._stopping = State.STARTING, asyncio.Event(), asyncio.Event()
        self._slow_told = False
        self.starts += 1
        self._task = self._loop.create_task(self._serve(self._ready, self._stopping), name=f"mcp:{self.spec.name}")
        return self._ready

    def tell_slow(self, seconds: float) -> None:
        """One line per start that a run gave up waiting for."""
        if not self._slow_told:
            self._slow_told = True
            logger.warning(
                "MCP server %r is not ready after %g s; runs go on without its tools until it is",
                self.spec.name,
                seconds,
            )

    async def _serve(self, ready: asyncio.Event, stopping: asyncio.Event) -> None:
        name = self.spec.name
        try:
            async with create_session(self.spec.connection()) as session:  # type: ignore[arg-type]
                await session.initialize()
                tools = await load_mcp_tools(session, server_name=name, tool_interceptors=[self.guard])
                for tool in tools:
                    mark(tool, name, self.spec.transport)
                self.tools, self.state, self.error, self.failures = tuple(tools), State.RUNNING, None, 0
                ready.set()
                logger.info("MCP server %r is running with %d tool(s)", name, len(tools))
                await stopping.wait()
        except asyncio.CancelledError:
            if not stopping.is_set():
                raise
        except Exception as exc:  # the server's, the transport's or the SDK's: fail open
            self._failed(_line(exc))
        finally:
            if self.state is State.STARTING:  # cancelled or stopped before it came up
                self.state = State.STOPPED
            ready.set()

    def _failed(self, line: str) -> None:
        if self.state is State.FAILED:
            return
        self.failures += 1
        backoff = min(
            self._config.restart_backoff_seconds * 2 ** (self.failures - 1), self._config.max_restart_backoff_seconds
        )
        self._retry_at = time.monotonic() + backoff
        self.state, self.error, self.tools = State.FAILED, line, ()
        self._stopping.set()
        logger.warning(
            "MCP server %r failed: %s; runs go on without its tools (next start in %g s)", self.spec.name, line, backoff
        )

    async def stop(self) -> None:
        """End the session (a stdio server's process with it); wait a bounded time."""
        self._stopping.set()
        task, self._task = self._task, None
        starting = self.state is State.STARTING
        if self.state is not State.FAILED:
            self.state = State.STOPPED
        self.tools = ()
        if task is None or task.done():
            return
        if starting:  # still opening its session (a server that never answers): nothing to close gracefully
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=_STOP_SECONDS)
        if not done:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- calls -------------------------------------------------------------------------
    async def guard(
        self, request: MCPToolCallRequest, handler: Callable[[MCPToolCallRequest], Awaitable[MCPToolCallResult]]
    ) -> MCPToolCallResult:
        """The adapter's interceptor for every call of this server's tools."""
        if self.state is not State.RUNNING:
            return _error(f"MCP server {self.spec.name!r} is not running ({self.error or self.state}); try later")
        seconds = self._config.call_timeout_seconds
        try:
            if asyncio.get_running_loop() is self._loop:
                return await asyncio.wait_for(handler(request), seconds)
            carried = asyncio.run_coroutine_threadsafe(_bounded(handler(request), seconds), self._loop)
            return await asyncio.wrap_future(carried)
        except TimeoutError:
            return _error(f"MCP server {self.spec.name!r} did not answer {request.name} within {seconds:g} s")
        except McpError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                self._loop.call_soon_threadsafe(self._failed, f"the connection closed during {request.name}")
                return _error(f"MCP server {self.spec.name!r} went away during {request.name}")
            return _error(f"MCP server {self.spec.name!r}: {exc.error.message}")
        except Exception as exc:
            line = _line(exc)
            self._loop.call_soon_threadsafe(self._failed, line)
            return _error(f"MCP server {self.spec.name!r} failed during {request.name}: {line}")


async def _bounded(call: Awaitable[Any], seconds: float) -> Any:
    return await asyncio.wait_for(call, seconds)


def _line(exc: BaseException) -> str:
    """The exception as one line; a task group's (the SDK's transports run in anyio's) is
    the first of what it holds, which says what went wrong."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exception_text(exc, one_line=True, limit=300)
