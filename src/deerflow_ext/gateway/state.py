"""What the lifespan builds and the routes use, kept on ``app.state.runtime``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request

from ..persistence.records import HostStore
from ..runtime.manager import RunManager

__all__ = ["GatewayRuntime", "runtime_of"]


@dataclass(frozen=True)
class GatewayRuntime:
    engine: Any
    store: HostStore
    runs: RunManager
    agent_host: Any
    checkpointer: Any


def runtime_of(request: Request) -> GatewayRuntime:
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is None:
        raise HTTPException(status_code=503, detail="the Gateway is not serving (starting up or shutting down)")
    return runtime
