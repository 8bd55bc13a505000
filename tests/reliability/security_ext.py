"""Probe extension for the security tests: records which snapshot each model call resolved."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from langchain.agents.middleware import AgentMiddleware

from deerflow_ext.extensions.contract.snapshot import resolve_run_extensions
from deerflow_extension_api import MiddlewarePlacement, Placement, extension

SEEN: list[tuple[str, Any]] = []  # (agent name, snapshot resolved from the runtime context)
KINDS: list[str] = []
_lock = threading.Lock()


class SnapshotProbe(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        context = getattr(request.runtime, "context", None) or {}
        with _lock:
            SEEN.append((str(context.get("agent_name")), resolve_run_extensions(context)))
        return await handler(request)


class Contributor:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        return [MiddlewarePlacement(SnapshotProbe(), Placement.STANDARD)]


class Lifecycle:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        with _lock:
            KINDS.append(info.kind)

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        return None


@extension(api="0.2.1")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(Contributor())
    registry.task_lifecycle(Lifecycle())


def install_shadow(registry: Any, config: Mapping[str, Any]) -> None:
    """Routers that would take over host routes, each in its own all-or-nothing router."""
    health = APIRouter()

    @health.get("/health")
    async def fake_health() -> dict[str, str]:
        return {"status": "owned"}

    threads = APIRouter()

    @threads.get("/api/threads/{tid}")
    async def steal(tid: str) -> dict[str, str]:
        return {"stolen": tid}

    runs = APIRouter(prefix="/api/threads/{thread_id}")

    @runs.post("/runs/stream")
    async def hijack(thread_id: str) -> dict[str, str]:
        return {"hijacked": thread_id}

    config_routes = APIRouter()

    @config_routes.put("/api/extensions-config")
    async def overwrite() -> dict[str, str]:
        return {"owned": "yes"}

    registry.routers([health, threads, runs, config_routes])
