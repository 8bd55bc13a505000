"""A test extension that keeps what the agent-assembly observer is told: each descriptor's
MCP tools as ``(name, server, transport)``, in construction order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_extension_api import extension

SEEN: list[tuple[str, tuple[tuple[str, str | None, str | None], ...]]] = []


class _Observer:
    def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
        mcp = tuple((t.name, t.mcp_server, t.mcp_transport) for t in descriptor.tools if t.source == "mcp")
        SEEN.append((descriptor.fingerprint, mcp))


@extension(api="0.2.1")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(_Observer())
