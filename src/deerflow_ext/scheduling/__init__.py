"""Crons: runs the Gateway starts on a schedule, with no client connected.

This package owns what a cron *is* and *when* it fires: the schedule (five cron fields read
by croniter, in UTC or an IANA ``timezone``), the rows (``persistence.cron_table``) and their
reads and writes (:class:`CronStore`), and the background task that wakes at the earliest
``next_run_date`` and claims what is due (:class:`Scheduler`). It does not know how a run is
started: the Gateway hands the scheduler a ``fire`` function that goes through the same code
as ``POST /threads/{id}/runs`` (``gateway.routes.crons``), so a cron's run is a run like any
other for observers, lifecycle hooks and the extension contract.

Exactly one run per tick across processes: a claim selects the due rows and advances their
``next_run_date`` in one transaction (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite has
one process). Ticks missed while no Gateway ran collapse into one firing: the next date is
computed from *now*, not from the missed tick. A tick is claimed before its run starts, so a
process killed between the two loses that tick's run (at most once per tick) and leaves no
cron stuck: the row already names its next tick.
"""

from .scheduler import Scheduler
from .schedules import Clock, ScaledClock, ScheduleError, SystemClock, check_schedule, clock_from_env, next_tick
from .store import CronDraft, CronNotFoundError, CronQuery, CronRecord, CronStore, Due

__all__ = [
    "Clock",
    "CronDraft",
    "CronNotFoundError",
    "CronQuery",
    "CronRecord",
    "CronStore",
    "Due",
    "ScaledClock",
    "ScheduleError",
    "Scheduler",
    "SystemClock",
    "check_schedule",
    "clock_from_env",
    "next_tick",
]
