"""Which MCP server a tool came from, carried in the tool's ``metadata``.

The assembly descriptor reports an MCP tool with ``source="mcp"``, its server and its
transport; the agent builder reads them here. Plain strings under namespaced keys: tool
metadata reaches callbacks and tracers, which serialise it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SERVER_KEY", "TRANSPORT_KEY", "McpOrigin", "mark", "mcp_origin"]

SERVER_KEY = "deerflow_mcp_server"
TRANSPORT_KEY = "deerflow_mcp_transport"


@dataclass(frozen=True, slots=True)
class McpOrigin:
    server: str
    transport: str


def mark(tool: Any, server: str, transport: str) -> None:
    """Record ``server`` and ``transport`` in ``tool.metadata`` (kept: the adapter puts the
    MCP tool's annotations there)."""
    tool.metadata = {**(tool.metadata or {}), SERVER_KEY: server, TRANSPORT_KEY: transport}


def mcp_origin(tool: Any) -> McpOrigin | None:
    """The server and transport of an MCP tool; None for any other tool."""
    metadata = getattr(tool, "metadata", None)
    # A plain dict check (BaseTool.metadata is a dict or None): this runs for every tool each
    # time an agent is described.
    server = metadata.get(SERVER_KEY) if type(metadata) is dict else None
    if server is None:
        return None
    return McpOrigin(str(server), str(metadata.get(TRANSPORT_KEY)))  # type: ignore[union-attr]
