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
    # The LangGraph store (``persistence.item_store.ItemStore``) the ``/store`` routes and the
    # lead graph's ``runtime.store`` share; None where a Gateway is built without one.
    items: Any = None
    # The cron scheduler (``scheduling.Scheduler``) the crons routes write through and wake;
    # None where a Gateway is built without one.
    crons: Any = None
    # The TTL sweeps and thread expiry (``expiry.Expiry``) the thread routes set a client's
    # ``ttl`` and prune through; None where a Gateway is built without one.
    expiry: Any = None
    # The webhooks (``webhooks.WebhookService``): the URL policy the run routes check and the
    # delivery worker a run's end wakes; None where a Gateway is built without one.
    webhooks: Any = None


def runtime_of(request: Request) -> GatewayRuntime:
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is None:
        raise HTTPException(status_code=503, detail="the Gateway is not serving (starting up or shutting down)")
    serving: GatewayRuntime = runtime
    return serving
