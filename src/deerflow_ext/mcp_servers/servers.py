"""All of the file's MCP servers for one Gateway process: the tools a run gets.

:meth:`McpServers.tools` is what a run asks for. It looks at the file (a ``stat``), applies
an edit (a server removed, disabled or changed is stopped; a new or changed one is started
by the run that needs it), starts what is not running (a failed server once its backoff is
over), waits for servers that are starting at most ``mcp.startup_timeout_seconds``, and
answers the tools of the running ones. The answer is the same tuple, of the same tool
objects, for as long as the servers' tools do not change: the agent's compiled graph and
its assembly descriptor are reused across runs by identity.

With no server configured the answer is an empty tuple and neither the MCP SDK nor the
adapters are imported; the first server configured imports ``connection.py`` in a worker
thread (the loop is not stalled by an import of seconds on a loaded machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow_ext.config.schema import McpConfig

from .specs import ServerSpec, SpecsFile

if TYPE_CHECKING:
    from .connection import ServerConnection

__all__ = ["McpServers", "ServerStatus"]

logger = logging.getLogger("deerflow_ext.mcp_servers")


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """One server of the file as the state view shows it (no ``env`` or header values)."""

    name: str
    transport: str
    enabled: bool
    state: str  # starting | running | failed | stopped (not started yet) | disabled | invalid
    tools: tuple[str, ...] = ()
    error: str | None = None
    starts: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "enabled": self.enabled,
            "state": self.state,
            "tools": list(self.tools),
            "error": self.error,
            "starts": self.starts,
        }


class McpServers:
    """The servers of ``path`` (``extensions_config.json``) under ``config`` (``mcp:``).

    ``reserved_names`` are the host's own tools' names: an MCP tool named like one is left
    out (and so is one named like an earlier server's tool), with one log line.
    """

    def __init__(self, path: Path, config: McpConfig, *, reserved_names: Iterable[str] = ()) -> None:
        self._file = SpecsFile(path)
        self._config = config
        self._reserved = frozenset(reserved_names)
        self._applied: tuple[ServerSpec, ...] = ()
        self._connections: dict[str, ServerConnection] = {}
        self._tools: tuple[Any, ...] = ()
        self._tools_from: tuple[tuple[Any, ...], ...] = ()
        self._left_out: set[tuple[str, str]] = set()
        self._told: set[str] = set()
        self._stops: set[asyncio.Task[None]] = set()
        self._module: Any = None

    async def tools(self) -> tuple[Any, ...]:
        """The tools of every running server, for the run about to start."""
        specs = self._file.current()
        if specs is not self._applied:
            await self._apply(specs)
        if not self._connections:
            return ()
        starting = [(c, ready) for c in self._connections.values() if (ready := c.ensure_started()) is not None]
        waits = [asyncio.ensure_future(ready.wait()) for _, ready in starting if not ready.is_set()]
        if waits:
            seconds = self._config.startup_timeout_seconds
            _, pending = await asyncio.wait(waits, timeout=seconds)
            for wait in pending:
                wait.cancel()
            for connection, ready in starting:
                if not ready.is_set():
                    connection.tell_slow(seconds)
        return self._current()

    def ready_tools(self) -> tuple[Any, ...]:
        """The tools as the last run got them, for a subagent (any thread; starts nothing)."""
        return self._tools

    def _current(self) -> tuple[Any, ...]:
        sets = tuple(c.tools for c in self._connections.values())
        if len(sets) == len(self._tools_from) and all(a is b for a, b in zip(sets, self._tools_from, strict=True)):
            return self._tools
        taken = set(self._reserved)
        tools: list[Any] = []
        for connection in self._connections.values():
            for tool in connection.tools:
                if tool.name in taken:
                    if (connection.spec.name, tool.name) not in self._left_out:
                        self._left_out.add((connection.spec.name, tool.name))
                        logger.warning(
                            "MCP server %r: tool %r is left out, another tool has that name",
                            connection.spec.name,
                            tool.name,
                        )
                    continue
                taken.add(tool.name)
                tools.append(tool)
        self._tools_from, self._tools = sets, tuple(tools)
        return self._tools

    async def _apply(self, specs: tuple[ServerSpec, ...]) -> None:
        self._applied = specs
        wanted = {s.name: s for s in specs if s.enabled and s.problem is None}
        for spec in specs:
            if spec.problem is not None and spec.problem not in self._told:
                self._told.add(spec.problem)
                logger.warning("%s; that MCP server is left out", spec.problem)
        for name, connection in list(self._connections.items()):
            if wanted.get(name) != connection.spec:
                del self._connections[name]
                stop = asyncio.ensure_future(connection.stop())
                self._stops.add(stop)
                stop.add_done_callback(self._stops.discard)
        if not wanted.keys() - self._connections.keys():
            return
        if self._module is None:
            self._module = await asyncio.to_thread(importlib.import_module, f"{__package__}.connection")
        loop = asyncio.get_running_loop()
        # In the file's order, so an earlier server keeps a tool name a later one repeats.
        connections = dict(self._connections)
        self._connections = {
            name: connections.get(name) or self._module.ServerConnection(spec, self._config, loop)
            for name, spec in wanted.items()
        }

    def statuses(self) -> list[ServerStatus]:
        """Every server of the file, in its order, with what this process knows of it."""
        statuses: list[ServerStatus] = []
        for spec in self._file.current():
            connection = self._connections.get(spec.name)
            if spec.problem is not None:
                state, error = "invalid", spec.problem
            elif not spec.enabled:
                state, error = "disabled", None
            elif connection is None:
                state, error = "stopped", None
            else:
                state, error = str(connection.state), connection.error
            statuses.append(
                ServerStatus(
                    name=spec.name,
                    transport=spec.transport,
                    enabled=spec.enabled,
                    state=state,
                    tools=tuple(t.name for t in connection.tools) if connection is not None else (),
                    error=error,
                    starts=connection.starts if connection is not None else 0,
                )
            )
        return statuses

    @property
    def file_error(self) -> str | None:
        """Why the file's last edit was not applied (it did not parse), if so."""
        return self._file.error

    async def aclose(self) -> None:
        """Stop every server (the Gateway's shutdown)."""
        connections, self._connections = list(self._connections.values()), {}
        self._applied, self._tools, self._tools_from = (), (), ()
        stops = [*self._stops, *(asyncio.ensure_future(c.stop()) for c in connections)]
        if stops:
            with contextlib.suppress(Exception):
                await asyncio.gather(*stops, return_exceptions=True)
