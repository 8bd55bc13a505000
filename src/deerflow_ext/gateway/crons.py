"""Creating a cron, and what every crons route checks (the routes: ``routes.crons`` and,
for a thread's cron, ``routes.runs``, beside the thread's other run routes).

A cron is checked when it is created or changed as the runs it will start would be: its
schedule and time zone (``scheduling.check_schedule``), its assistant (404) and its payload
as a ``RunCreate`` (422 naming the field), so no tick finds a cron no run would take.
A ``webhook`` is checked by the Gateway's URL policy as a run's is (422 naming the reason),
and again when each tick's run starts.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request
from pydantic import ValidationError

from ..scheduling import CronDraft, CronStore, ScheduleError, Scheduler, check_schedule
from .assistants import resolve_assistant
from .cron_schemas import CronCreate, CronOut, CronPatch
from .errors import validation_message
from .schemas import RunCreate
from .scoping import RUN_USER_METADATA_KEY, authorized, request_user, visible_thread
from .state import GatewayRuntime
from .webhook_orders import check_webhook

__all__ = ["check_cron", "checked_payload", "create_cron", "cron_store_of", "scheduler_of"]


def scheduler_of(runtime: GatewayRuntime) -> Scheduler:
    if runtime.crons is None:
        raise HTTPException(status_code=503, detail="this Gateway was built without a cron scheduler")
    scheduler: Scheduler = runtime.crons
    return scheduler


def cron_store_of(runtime: GatewayRuntime) -> CronStore:
    return scheduler_of(runtime).store


def checked_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as the run it will start: 422 now, naming the field, if no run would take it."""
    try:
        RunCreate.model_validate(payload)
    except ValidationError as exc:
        raise HTTPException(status_code=422, detail=validation_message([dict(e) for e in exc.errors()])) from exc
    return payload


async def check_cron(
    runtime: GatewayRuntime, body: CronCreate | CronPatch, schedule: str, timezone: str | None
) -> None:
    if body.webhook is not None:
        await check_webhook(runtime, body.webhook)
    try:
        check_schedule(schedule, timezone)
    except ScheduleError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc


async def create_cron(
    runtime: GatewayRuntime, body: CronCreate, thread_id: str | None, request: Request | None = None
) -> CronOut:
    """A new cron on ``thread_id`` (None: stateless), checked as its runs will be.

    ``request``: with ``auth``, its user's ``crons.create`` handler runs first (its
    ``metadata`` changes kept), the thread must be one the user may see (``threads.read``),
    and the cron and the runs it starts record the user (``user_id``, the runs' metadata)."""
    await check_cron(runtime, body, body.schedule, body.timezone)
    metadata = dict(body.metadata or {})
    user = request_user(request) if request is not None else None
    if request is not None and user is not None:
        value = {**body.model_dump(mode="json", exclude_none=True), "thread_id": thread_id, "user_id": user.identity}
        value["metadata"] = metadata
        await authorized(request, "crons", "create", value)
        metadata = dict(value.get("metadata") or {})
        if thread_id is not None:
            await visible_thread(request, runtime, thread_id)
    if thread_id is not None:
        if body.on_run_completed is not None:
            raise HTTPException(
                status_code=422, detail="on_run_completed: applies to stateless crons only (POST /runs/crons)"
            )
        if await runtime.store.get_thread(thread_id) is None:
            raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    await resolve_assistant(runtime, body.assistant_id)  # 404 now rather than at every tick
    payload = checked_payload(body.run_payload())
    if user is not None:  # each tick's run is the user's, as if they had started it
        payload["metadata"] = {**(payload.get("metadata") or {}), RUN_USER_METADATA_KEY: user.identity}
    scheduler = scheduler_of(runtime)
    draft = CronDraft(
        assistant_id=body.assistant_id,
        schedule=body.schedule,
        payload=payload,
        thread_id=thread_id,
        timezone=body.timezone,
        end_time=body.end_time,
        on_run_completed=None if thread_id is not None else (body.on_run_completed or "delete"),
        metadata=metadata,
        enabled=True if body.enabled is None else body.enabled,
        user_id=user.identity if user is not None else None,
    )
    record = await scheduler.store.create(draft, scheduler.clock.now())
    scheduler.changed()
    return CronOut.of(record)
