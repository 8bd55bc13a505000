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

from fastapi import HTTPException
from pydantic import ValidationError

from ..scheduling import CronDraft, CronStore, ScheduleError, Scheduler, check_schedule
from .assistants import resolve_assistant
from .cron_schemas import CronCreate, CronOut, CronPatch
from .errors import validation_message
from .schemas import RunCreate
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


async def create_cron(runtime: GatewayRuntime, body: CronCreate, thread_id: str | None) -> CronOut:
    """A new cron on ``thread_id`` (None: stateless), checked as its runs will be."""
    await check_cron(runtime, body, body.schedule, body.timezone)
    if thread_id is not None:
        if body.on_run_completed is not None:
            raise HTTPException(
                status_code=422, detail="on_run_completed: applies to stateless crons only (POST /runs/crons)"
            )
        if await runtime.store.get_thread(thread_id) is None:
            raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
    await resolve_assistant(runtime, body.assistant_id)  # 404 now rather than at every tick
    payload = checked_payload(body.run_payload())
    scheduler = scheduler_of(runtime)
    draft = CronDraft(
        assistant_id=body.assistant_id,
        schedule=body.schedule,
        payload=payload,
        thread_id=thread_id,
        timezone=body.timezone,
        end_time=body.end_time,
        on_run_completed=None if thread_id is not None else (body.on_run_completed or "delete"),
        metadata=body.metadata or {},
        enabled=True if body.enabled is None else body.enabled,
    )
    record = await scheduler.store.create(draft, scheduler.clock.now())
    scheduler.changed()
    return CronOut.of(record)
