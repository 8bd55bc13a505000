"""What the LangGraph Platform suite's cases share: the server they drive and the inputs they send."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gateway.sdk_server import SdkServer

__all__ = ["COMPAT_URL", "PLUGINS", "Platform", "human"]

COMPAT_URL = os.environ.get("DEERFLOW_COMPAT_URL")
"""LangGraph's own server to run the suite against instead of ours (``nox -s compat``)."""

PLUGINS: list[dict[str, Any]] = [
    # Reads and writes the graph's runtime.store when a message says store:<label>/<key>.
    {"name": "store-reader", "use": "store_reader_ext:install"},
    # Streams the run's echo_* context keys as a custom event when a message says echo-context.
    {"name": "context-echo", "use": "platform_api.context_echo_ext:install"},
]
"""config.yaml entries every Gateway of this suite loads after the gate extension."""


@dataclass(frozen=True)
class Platform:
    """A server the suite drives: its API root and, for ours, the running Gateway."""

    kind: str  # "sqlite", "postgres" or "peer"
    url: str
    served: SdkServer | None = None

    @property
    def is_peer(self) -> bool:
        return self.kind == "peer"


def human(text: str) -> dict[str, Any]:
    """A run's input as a client sends it: one user message."""
    return {"messages": [{"role": "user", "content": text}]}
