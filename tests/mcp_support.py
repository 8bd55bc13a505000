"""The official MCP client as a test drives it, on whichever major line of the ``mcp`` SDK is
installed.

The SDK's 1.x and 2.x lines spell the same client differently: 1.x's streamable-HTTP transport
is ``streamablehttp_client`` on ``httpx`` (headers and a timeout as arguments), 2.x's
``streamable_http_client`` on an ``httpx2`` client of the caller's; 1.x's models are camelCase
(``inputSchema``, ``isError``), 2.x's snake_case; the protocol error is ``McpError`` or
``MCPError``. The Gateway serves on one line and LangChain's adapters need the other, so a case
that uses only the names here reads the same on both (the wire protocol does not change).
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

from mcp import ClientSession

__all__ = ["MCP_MAJOR", "ProtocolError", "input_schema", "is_error", "mcp_session", "text_of"]

MCP_MAJOR = int(version("mcp").split(".")[0])
"""The installed SDK's major version: 1 or 2."""

_SECONDS = 60.0
"""How long a request may wait for the server's answer: a tool call runs an agent."""

if MCP_MAJOR >= 2:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError as ProtocolError
else:
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.shared.exceptions import McpError as ProtocolError


@asynccontextmanager
async def mcp_session(url: str, *, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """An initialised client session on the MCP endpoint at ``url`` (``headers`` on every request)."""
    if MCP_MAJOR >= 2:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=_SECONDS) as http,
            streamable_http_client(url, http_client=http) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
        return
    with warnings.catch_warnings():
        # 1.x's later releases deprecate this name for 2.x's; it is the one every 1.x has.
        warnings.simplefilter("ignore", DeprecationWarning)
        transport = streamablehttp_client(url, headers=headers, timeout=_SECONDS)
    async with transport as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def input_schema(tool: Any) -> dict[str, Any]:
    """A listed tool's JSON schema for its arguments."""
    return dict(tool.input_schema if MCP_MAJOR >= 2 else tool.inputSchema)


def is_error(result: Any) -> bool:
    """Whether a ``tools/call`` result is a tool error."""
    return bool(result.is_error if MCP_MAJOR >= 2 else result.isError)


def text_of(result: Any) -> str:
    """The text parts of a ``tools/call`` result, joined."""
    return "".join(part.text for part in result.content if part.type == "text")
