"""``GET /api/ext/tally/stats``, and the service that lends it the Gateway's app store.

The router is built during ``install()``, before the Gateway has started anything, so its
paths are fixed at load time; what it reads arrives later, when the Gateway starts the
service. Until then, and after the service stops, the route answers 503 instead of reading
a store it was never given.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from deerflow_extension_api import ExtensionRuntimeDeps

from .counts import Tally

__all__ = ["StatsService", "stats_router"]

PREFIX = "/api/ext/tally"


class StatsService:
    """Holds the runtime deps between the Gateway's ``start`` and ``stop``."""

    def __init__(self) -> None:
        self.deps: ExtensionRuntimeDeps | None = None

    async def start(self, deps: ExtensionRuntimeDeps) -> None:
        self.deps = deps

    async def stop(self) -> None:
        self.deps = None

    def running(self) -> ExtensionRuntimeDeps:
        deps = self.deps
        if deps is None or deps.app_store is None:
            raise HTTPException(status_code=503, detail="the tally extension is not running")
        return deps


def stats_router(service: StatsService) -> APIRouter:
    router = APIRouter(prefix=PREFIX, tags=["tally"])

    @router.get("/stats")
    def stats(deps: ExtensionRuntimeDeps = Depends(service.running)) -> dict[str, Any]:
        assert deps.app_store is not None  # checked by service.running
        return {
            "scope_id": deps.app_store.scope_id,
            "database": deps.session_factory is not None,
            "max_subagents_per_run": deps.policy.max_subagents_per_run,
            **deps.app_store.get_or_init(Tally, Tally).snapshot(),
        }

    return router
