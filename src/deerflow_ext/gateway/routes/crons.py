"""Crons: the LangGraph Platform cron routes, and how a cron's tick becomes a run.

``POST /threads/{thread_id}/runs/crons`` schedules runs on a thread (that route is the runs
router's, beside the thread's other run routes); ``POST /runs/crons`` a
stateless cron, each firing on a new thread that goes when its run ended (``on_run_completed:
delete``, the default) or stays (``keep``). ``/runs/crons/search``, ``/count``, ``PATCH`` and
``DELETE /runs/crons/{cron_id}`` are as ``langgraph_sdk``'s ``crons`` client calls them.

A tick starts its run through the very functions ``POST /threads/{id}/runs`` and
``POST /runs`` use (``runs.start_run``, ``stateless.start_stateless``), so admission,
``multitask_strategy``, hooks, persistence and streams are a normal run's; the run's
metadata adds ``cron_id`` and ``cron_tick`` (the tick it fired for). When and how often a
cron fires is ``deerflow_ext.scheduling``'s (README, "Crons").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response

from ...persistence.models import DEFAULT_USER_ID
from ...scheduling import (
    CronNotFoundError,
    CronQuery,
    Due,
)
from ..cron_schemas import CronCount, CronCreate, CronOut, CronPatch, CronSearch
from ..crons import check_cron, checked_payload, create_cron, cron_store_of, scheduler_of
from ..schemas import RunCreate
from ..scoping import RUN_USER_METADATA_KEY, authorized
from ..state import GatewayRuntime, runtime_of
from .runs import start_run
from .stateless import forget_after, start_stateless

__all__ = ["fire_cron", "router"]

router = APIRouter(tags=["crons"])


@router.post("/api/runs/crons", response_model=CronOut)
async def create_stateless_cron(request: Request, body: CronCreate) -> CronOut:
    """Schedule stateless runs: each tick runs on a new thread (``on_run_completed``)."""
    return await create_cron(runtime_of(request), body, None, request)


async def _query(request: Request, body: CronCount) -> dict[str, Any]:
    found: dict[str, Any] = {
        "assistant_id": body.assistant_id,
        "thread_id": body.thread_id,
        "metadata": body.metadata or {},
    }
    if request.scope.get("user") is not None:
        value = body.model_dump(mode="json", exclude_none=True)
        found["filters"] = await authorized(request, "crons", "search", value)
    return found


async def _filters(request: Request, action: str, value: dict[str, Any]) -> Any:
    """The user's ``crons.<action>`` filter (``auth``); None without ``auth``."""
    if request.scope.get("user") is None:
        return None
    return await authorized(request, "crons", action, value)


def _jsonable_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            value = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()
        out[key] = value
    return out


@router.post("/api/runs/crons/search")
async def search_crons(request: Request, body: CronSearch) -> list[dict[str, Any]]:
    """Crons matching the filters, one page, in ``sort_by`` order (``select``: those fields)."""
    query = CronQuery(
        **await _query(request, body),
        enabled=body.enabled,
        limit=body.limit,
        offset=body.offset,
        sort_by=body.sort_by,
        sort_order=body.sort_order,
        select=tuple(body.select or ()),
    )
    return [_jsonable_row(row) for row in await cron_store_of(runtime_of(request)).search(query)]


@router.post("/api/runs/crons/count")
async def count_crons(request: Request, body: CronCount) -> int:
    return await cron_store_of(runtime_of(request)).count(CronQuery(**await _query(request, body)))


@router.patch("/api/runs/crons/{cron_id}", response_model=CronOut)
async def update_cron(request: Request, cron_id: str, body: CronPatch) -> CronOut:
    """Change a cron; its next tick is computed again from now."""
    runtime = runtime_of(request)
    scheduler = scheduler_of(runtime)
    value = {**body.model_dump(mode="json", exclude_none=True), "cron_id": cron_id}
    filters = await _filters(request, "update", value)
    current = await scheduler.store.get(cron_id, filters)
    if current is None:
        raise HTTPException(status_code=404, detail=f"cron {cron_id} not found")
    await check_cron(runtime, body, body.schedule or current.schedule, body.timezone or current.timezone)
    changes: dict[str, Any] = {}
    for name in ("schedule", "timezone", "enabled", "metadata"):
        if getattr(body, name) is not None:
            changes[name] = getattr(body, name)
    if "end_time" in body.model_fields_set:
        changes["end_time"] = body.end_time
    if body.on_run_completed is not None:
        if current.thread_id is not None:
            raise HTTPException(status_code=422, detail="on_run_completed: applies to stateless crons only")
        changes["on_run_completed"] = body.on_run_completed
    run_fields = body.run_payload()
    if run_fields:
        checked_payload({**current.payload, **run_fields})
        changes["payload"] = run_fields
    try:
        record = await scheduler.store.update(cron_id, changes, scheduler.clock.now(), filters)
    except CronNotFoundError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    scheduler.changed()
    return CronOut.of(record)


@router.delete("/api/runs/crons/{cron_id}", status_code=204)
async def delete_cron(request: Request, cron_id: str) -> Response:
    """Delete a cron: no tick fires after this (a run already started goes on)."""
    scheduler = scheduler_of(runtime_of(request))
    filters = await _filters(request, "delete", {"cron_id": cron_id})
    if not await scheduler.store.delete(cron_id, filters):
        raise HTTPException(status_code=404, detail=f"cron {cron_id} not found")
    scheduler.changed()
    return Response(status_code=204)


async def fire_cron(runtime: GatewayRuntime | None, due: Due) -> None:
    """Start the run of one claimed tick, as ``POST /threads/{id}/runs`` (a thread's cron)
    or ``POST /runs`` (a stateless one) would; a refusal (thread busy under ``reject``, gone,
    shutting down) raises, and the scheduler logs it with the cron's id."""
    if runtime is None:
        raise RuntimeError("the Gateway is shutting down")
    cron = due.cron
    payload = dict(cron.payload)
    payload["metadata"] = {
        **(payload.get("metadata") or {}),
        "cron_id": cron.cron_id,
        "cron_tick": due.tick.isoformat(),
    }
    body = RunCreate.model_validate(payload)
    if cron.thread_id is not None:
        await start_run(runtime, cron.thread_id, body, user_id=cron.user_id or DEFAULT_USER_ID)
        return
    body = body.model_copy(update={"on_completion": cron.on_run_completed or "delete"})
    # A user's cron (``auth``): its new thread carries the cron's metadata, which the user's
    # ``crons.create`` handler stamped, so the user finds it as they find the cron.
    owned = {**cron.metadata, RUN_USER_METADATA_KEY: cron.user_id} if cron.user_id is not None else None
    thread_id, handle = await start_stateless(
        runtime, body, user_id=cron.user_id or DEFAULT_USER_ID, owner_metadata=owned
    )
    forget_after(runtime, thread_id, handle, body)
