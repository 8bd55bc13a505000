"""An extension with routes that read the request's principal (``test_identity_principal``,
``test_identity_users``): ``/identity-test/whoami`` answers it, ``/identity-test/admin`` is
for administrators only, ``/identity-test/agent-runs`` drives the request's agent-run handle
(``create`` a thread; ``start`` a run on one and wait for it) and answers its refusal's status.

A module of its own, importing no ``conftest``: the loader imports it as
``gateway.identity_routes_ext``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Body, HTTPException, Request

from deerflow_extension_api import AgentRunError, require_admin, require_agent_runs, resolve_principal

router = APIRouter(prefix="/identity-test")


@router.get("/whoami")
async def whoami(request: Request) -> dict[str, Any]:
    principal = resolve_principal(request)
    if principal is None:
        return {"principal": None}
    return {"user_id": principal.user_id, "is_admin": principal.is_admin, "roles": list(principal.roles)}


@router.get("/admin")
async def admin_only(request: Request) -> dict[str, str]:
    try:
        return {"admin": require_admin(request).user_id}
    except PermissionError as exc:
        raise HTTPException(status_code=403, detail=str(exc)) from exc


@router.post("/agent-runs")
async def agent_runs(request: Request, step: dict[str, Any] = Body()) -> dict[str, Any]:
    runs = require_agent_runs(request)
    try:
        if step["step"] == "create":
            return {"thread_id": await runs.create_thread(metadata=step.get("metadata"))}
        thread_id = step["thread_id"]
        run = await runs.start(thread_id=thread_id, input={"messages": [{"role": "user", "content": "hi"}]})
        run = await runs.wait(thread_id=thread_id, run_id=run.run_id, timeout=60)
        return {"run_id": run.run_id, "status": run.status}
    except AgentRunError as exc:
        return {"refused": exc.status_code}


def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.routers([router])
