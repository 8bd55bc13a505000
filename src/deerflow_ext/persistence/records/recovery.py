"""What startup recovery writes: the runs a dead process left live, and the threads left
``busy`` without a live run. Transaction functions (``transactions``), on either database.

On PostgreSQL the processes sharing the database also end each other's runs while they
run (``runtime.presence``, ``runtime.pg_coordinator``); those sweeps use the same "mark a
run interrupted" (``pg_statements.interrupt_runs``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Connection, select, update

from ..models import THREAD_STATUS_AFTER, ThreadStatus, utcnow
from .statements import INTERRUPT_BUSY_THREADS, INTERRUPT_RUNS, LIVE, RUNS, THREADS

__all__ = ["ORPHANED_WHY", "interrupt_orphaned_runs", "settle_idle_busy_threads"]

ORPHANED_WHY = "the process running it stopped before it finished"
"""The error an orphaned run is ended with."""


def interrupt_orphaned_runs(conn: Connection, is_dead: Callable[[str | None], bool]) -> Sequence[str]:
    """Interrupt the live runs whose owner ``is_dead``, and their threads if ``busy``; the
    ids of the runs it changed."""
    rows = conn.execute(select(RUNS.c.id, RUNS.c.thread_id, RUNS.c.owner).where(RUNS.c.status.in_(LIVE))).all()
    orphaned = [(run_id, thread_id) for run_id, thread_id, owner in rows if is_dead(owner)]
    if not orphaned:
        return ()
    now = utcnow()
    run_ids = [run_id for run_id, _ in orphaned]
    conn.execute(INTERRUPT_RUNS, {"run_ids": run_ids, "now": now, "why": ORPHANED_WHY})
    conn.execute(INTERRUPT_BUSY_THREADS, {"thread_ids": sorted({t for _, t in orphaned}), "now": now})
    return tuple(run_ids)


def settle_idle_busy_threads(conn: Connection) -> Sequence[str]:
    """Give each thread ``busy`` without a live run its last run's status; the ids changed."""
    threads, runs = THREADS.c, RUNS.c
    has_live_run = select(runs.id).where(runs.thread_id == threads.id, runs.status.in_(LIVE)).exists()
    busy = conn.scalars(select(threads.id).where(threads.status == ThreadStatus.BUSY.value, ~has_live_run)).all()
    for thread_id in busy:
        last = conn.scalar(
            select(runs.status)
            .where(runs.thread_id == thread_id)
            .order_by(runs.created_at.desc(), runs.id.desc())
            .limit(1)
        )
        conn.execute(
            update(THREADS)
            .where(threads.id == thread_id, threads.status == ThreadStatus.BUSY.value)
            .values(status=THREAD_STATUS_AFTER.get(last or "", ThreadStatus.IDLE).value, updated_at=utcnow())
        )
    return tuple(busy)
