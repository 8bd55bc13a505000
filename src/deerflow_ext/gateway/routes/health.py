"""Liveness, server info, and whether the Gateway runs the deployment the operator configured.

``/health`` is the Gateway's own. It is always 200 while the process serves HTTP:
``{"status": "ok"}``, or ``{"status": "degraded", "reasons": [...]}`` when an enabled
extension failed to load (or is not installed) or a contributed service failed to start.
Degraded is not down: the Gateway serves runs without that extension, and a load balancer
should keep sending traffic; an operator (or an alert on ``status``) reads the reasons.
The database is probed too (``SELECT 1``, at most :data:`DATABASE_PROBE_SECONDS`): while it
is unreachable ``/health`` says degraded, naming it, and the pool reconnects on its own once
it is back — a Gateway that restarted itself would only lose its in-flight runs.
``/ok`` and ``/api/info`` are what LangGraph Platform clients probe (LangChain's
agent-chat-ui checks ``/info`` under its API URL before it starts a conversation).
"""

from __future__ import annotations

import asyncio
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import text

from ...extensions.operator_view.inventory import problems_of
from .operator import entry_reports

__all__ = ["DATABASE_PROBE_SECONDS", "package_version", "router"]

router = APIRouter(tags=["health"])

DATABASE_PROBE_SECONDS = 2.0


def package_version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def _failed_services(request: Request) -> list[str]:
    """Services whose start failed or timed out: the start attempt recorded a diagnostic."""
    state = request.app.state
    failed = {
        d.extension
        for d in state.extension_diagnostics.snapshot()
        if d.phase == "service" and d.message.startswith("service start")
    }
    return [
        f"service of extension {c.label} ({c.extension}) failed to start"
        for c in state.extensions.services
        if c.extension in failed
    ]


async def _database_down(request: Request) -> list[str]:
    """The database's answer to ``SELECT 1``: nothing, or why it is unreachable."""
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is None:  # starting up or shutting down: no engine to ask
        return []
    try:
        async with asyncio.timeout(DATABASE_PROBE_SECONDS):
            async with runtime.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
    except Exception as exc:
        kind = "no answer" if isinstance(exc, TimeoutError) else type(exc).__name__
        return [f"database unreachable ({kind} within {DATABASE_PROBE_SECONDS:g} s)"]
    return []


@router.get("/health")
async def health(request: Request) -> dict[str, Any]:
    reasons = [*problems_of(entry_reports(request)), *_failed_services(request), *await _database_down(request)]
    if reasons:
        return {"status": "degraded", "reasons": reasons}
    return {"status": "ok"}


@router.get("/ok")
@router.get("/api/ok", include_in_schema=False)
async def ok() -> dict[str, bool]:
    return {"ok": True}


@router.get("/api/info")
async def info() -> dict[str, Any]:
    return {
        "version": package_version("deerflow-ext"),
        "langgraph_py_version": package_version("langgraph"),
        "flags": {"assistants": True, "crons": True, "langsmith": False},
        "host": {"kind": "deerflow-ext"},
    }
