"""What startup recovery writes: the runs a dead process left live, and the threads left
``busy`` without a live run; and what it reads: the threads of stateless runs a dead process
left undeleted. Transaction functions (``transactions``), on either database.

On PostgreSQL the processes sharing the database also end each other's runs while they
run (``runtime.presence``, ``runtime.pg_coordinator``); those sweeps use the same "mark a
run interrupted" (``pg_statements.interrupt_runs``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from ..models import THREAD_STATUS_AFTER, ThreadStatus, utcnow
from .statements import (
    INSERT_OUTBOX,
    INTERRUPT_BUSY_THREADS,
    INTERRUPT_RUNS,
    RUNS,
    busy_threads_without_live_run,
    last_run_status,
    live_runs,
    settle_thread,
    temporary_runs_left,
)

__all__ = [
    "ORPHANED_WHY",
    "OwedOnRecovery",
    "interrupt_orphaned_runs",
    "settle_idle_busy_threads",
    "temporary_threads_left",
]

ORPHANED_WHY = "the process running it stopped before it finished"
"""The error an orphaned run is ended with."""

OwedOnRecovery = Callable[[str, str, Mapping[str, Any], datetime | None, datetime | None], Mapping[str, Any] | None]
"""``(run_id, thread_id, stored request, created_at, started_at)`` -> the webhook outbox row
an orphaned run owes (``webhook_table``), or None: the Gateway's, so the run's end by
recovery calls its webhook as its own end would have, in the same transaction."""


def interrupt_orphaned_runs(
    conn: Connection, is_dead: Callable[[str | None], bool], owed: OwedOnRecovery | None = None
) -> Sequence[str]:
    """Interrupt the live runs whose owner ``is_dead``, and their threads if ``busy``; the
    ids of the runs it changed. ``owed``: the webhook deliveries they owe, written here too."""
    rows = conn.execute(live_runs()).all()
    orphaned = [(run_id, thread_id) for run_id, thread_id, owner in rows if is_dead(owner)]
    if not orphaned:
        return ()
    now = utcnow()
    run_ids = [run_id for run_id, _ in orphaned]
    conn.execute(INTERRUPT_RUNS, {"run_ids": run_ids, "now": now, "why": ORPHANED_WHY})
    conn.execute(INTERRUPT_BUSY_THREADS, {"thread_ids": sorted({t for _, t in orphaned}), "now": now})
    if owed is not None:
        columns = (RUNS.c.id, RUNS.c.thread_id, RUNS.c.input, RUNS.c.created_at, RUNS.c.started_at)
        for row in conn.execute(select(*columns).where(RUNS.c.id.in_(run_ids))):
            stored = row.input if isinstance(row.input, Mapping) else {}
            outbox = owed(row.id, row.thread_id, stored, row.created_at, row.started_at)
            if outbox is not None:
                conn.execute(INSERT_OUTBOX, dict(outbox))
    return tuple(run_ids)


def settle_idle_busy_threads(conn: Connection) -> Sequence[str]:
    """Give each thread ``busy`` without a live run its last run's status; the ids changed."""
    busy = conn.scalars(busy_threads_without_live_run()).all()
    for thread_id in busy:
        last = conn.scalar(last_run_status(thread_id))
        conn.execute(settle_thread(thread_id, THREAD_STATUS_AFTER.get(last or "", ThreadStatus.IDLE), utcnow()))
    return tuple(busy)


def temporary_threads_left(conn: Connection, is_dead: Callable[[str | None], bool]) -> Sequence[str]:
    """The threads of stateless runs (``on_completion: delete``) that a process which is
    gone never deleted — it was killed during the run, or between the run's end and the
    deletion — and that no run holds now; ids, sorted. Read after
    :func:`interrupt_orphaned_runs`, so a run it just ended no longer counts as live. A
    thread whose marked run belongs to a live process is left to that process."""
    rows = conn.execute(temporary_runs_left()).all()
    alive = {thread_id for thread_id, owner in rows if not is_dead(owner)}
    return tuple(sorted({thread_id for thread_id, _ in rows} - alive))
