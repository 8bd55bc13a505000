"""The statements on threads and runs, as SQLAlchemy Core: what SQLite runs, and what
PostgreSQL runs in a transaction (``transactions``).

Every one is built once, here, its values bound at execution: the hot path's are compiled
once for the driver (``compiled``: ``sqlite_statements`` on SQLite) and SQLAlchemy
memoizes the others' cache keys. Core on a connection, not ORM sessions: a session's unit
of work, identity map and ORM execution plugins cost more CPU than the statements
(docs/ARCHITECTURE.md, "How a run's rows are written"). PostgreSQL's own forms, each one
round trip, are in ``pg_statements``.

Run and thread states are the enums of ``models``; a statement never spells one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Select, Table, Update, bindparam, delete, insert, or_, select, update

from ..models import LIVE_RUN_STATUSES, RunOutcome, RunRow, RunStatus, ThreadRow, ThreadStatus
from ..run_events_table import RUN_EVENTS
from ..webhook_table import WEBHOOK_OUTBOX

__all__ = [
    "CANCEL_RUN",
    "DELETE_EVENTS_OF_RUN",
    "DELETE_EVENTS_OF_THREAD",
    "DELETE_RUN",
    "DELETE_RUNS_OF_THREAD",
    "DELETE_THREAD",
    "INSERT_OUTBOX",
    "INSERT_RUN",
    "INSERT_THREAD",
    "INTERRUPTED_RUN",
    "INTERRUPT_BUSY_THREADS",
    "INTERRUPT_OLDER",
    "INTERRUPT_RUNS",
    "LIVE",
    "LIVE_RUN_OF_THREAD",
    "LOCK_THREAD",
    "RUNS",
    "SELECT_RUN",
    "SELECT_RUN_BY_ID",
    "SELECT_THREAD",
    "SET_THREAD_METADATA",
    "START_RUN",
    "TEMPORARY",
    "THREADS",
    "THREAD_METADATA",
    "UPDATE_RUN",
    "UPDATE_THREAD",
    "busy_threads_without_live_run",
    "cancel_requests_of",
    "last_run_status",
    "live_runs",
    "runs_of_thread",
    "settle_thread",
    "temporary_runs_left",
]

# Declarative models type ``__table__`` as a FromClause; it is a Table.
THREADS = cast(Table, ThreadRow.__table__)
RUNS = cast(Table, RunRow.__table__)

LIVE: tuple[str, ...] = tuple(status.value for status in LIVE_RUN_STATUSES)
"""The statuses of a run some process may still be executing, as stored."""

INTERRUPTED_RUN: dict[str, Any] = {"status": RunStatus.INTERRUPTED.value, "outcome": RunOutcome.ABORTED.value}
"""What a run interrupted before it finished records: one mapping, every dialect's form
(here and ``pg_statements.interrupt_runs``) built from it."""

INSERT_THREAD = insert(THREADS)
# A webhook delivery a run's end owes, written in its end's transaction (``webhook_table``).
INSERT_OUTBOX = insert(WEBHOOK_OUTBOX)
INSERT_RUN = insert(RUNS)
SELECT_THREAD = select(THREADS).where(THREADS.c.id == bindparam("thread_id"))
LOCK_THREAD = SELECT_THREAD.with_for_update()
SELECT_RUN = select(RUNS).where(RUNS.c.id == bindparam("run_id"), RUNS.c.thread_id == bindparam("thread_id"))
SELECT_RUN_BY_ID = select(RUNS).where(RUNS.c.id == bindparam("run_id"))
START_RUN = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("run_id"), RUNS.c.status == RunStatus.PENDING.value)
    .values(status=RunStatus.RUNNING.value, started_at=bindparam("now"))
)
# SET from the parameters' keys: one statement for every combination of columns written.
UPDATE_RUN = update(RUNS).where(RUNS.c.id == bindparam("run_id"))
UPDATE_THREAD = update(THREADS).where(THREADS.c.id == bindparam("thread_id"))
# A run's insert on SQLite reads only this: a process's SQLite transactions run one at a
# time (``transactions``), so nothing changes the row before the insert's own writes.
THREAD_METADATA = select(THREADS.c.metadata).where(THREADS.c.id == bindparam("thread_id"))
SET_THREAD_METADATA = (
    update(THREADS)
    .where(THREADS.c.id == bindparam("thread_id"))
    .values(metadata=bindparam("merged"), updated_at=bindparam("now"))
)
# A live run's status: ``LIVE`` spelled out, not ``IN``, so that statements compiled once
# (``compiled``: sent from the loop) have no expanding parameters.
_IS_LIVE = or_(*(RUNS.c.status == status for status in LIVE))
LIVE_RUN_OF_THREAD = select(RUNS.c.id).where(RUNS.c.thread_id == bindparam("thread_id"), _IS_LIVE).limit(1)

# Stop requests on live runs (``cancel_requested``), applied by whichever process runs them:
# a cancel's on one run; a follow-up's on the older runs of its thread.
_REQUEST_STOP = update(RUNS).where(_IS_LIVE).values(cancel_requested=bindparam("action"))
CANCEL_RUN = _REQUEST_STOP.where(RUNS.c.id == bindparam("run_id"))
# The older runs of the follow-up ``run_id``'s thread (a column's own name cannot be a
# bindparam of an UPDATE: ``on_thread``).
INTERRUPT_OLDER = _REQUEST_STOP.where(
    RUNS.c.thread_id == bindparam("on_thread"),
    RUNS.c.created_at < bindparam("created_before"),
    RUNS.c.id != bindparam("run_id"),
)

# A run ended as interrupted (``INTERRUPTED_RUN``) at ``now``, saying ``why``: only while it
# is still live, so a run that ended meanwhile keeps its end. Its thread, if ``busy``, too.
INTERRUPT_RUNS = (
    update(RUNS)
    .where(RUNS.c.id.in_(bindparam("run_ids", expanding=True)), RUNS.c.status.in_(LIVE))
    .values(**INTERRUPTED_RUN, finished_at=bindparam("now"), error=bindparam("why"))
)
INTERRUPT_BUSY_THREADS = (
    update(THREADS)
    .where(THREADS.c.id.in_(bindparam("thread_ids", expanding=True)), THREADS.c.status == ThreadStatus.BUSY.value)
    .values(status=ThreadStatus.INTERRUPTED.value, updated_at=bindparam("now"))
)

# Runs before their thread: SQLite honours ON DELETE CASCADE only with the foreign_keys pragma.
DELETE_RUNS_OF_THREAD = delete(RUNS).where(RUNS.c.thread_id == bindparam("thread_id"))
# The run journal goes with its runs (``run_events_table``), before them for the same reason.
DELETE_EVENTS_OF_THREAD = delete(RUN_EVENTS).where(RUN_EVENTS.c.thread_id == bindparam("thread_id"))
DELETE_EVENTS_OF_RUN = delete(RUN_EVENTS).where(
    RUN_EVENTS.c.run_id == bindparam("run_id"), RUN_EVENTS.c.thread_id == bindparam("thread_id")
)
DELETE_THREAD = delete(THREADS).where(THREADS.c.id == bindparam("thread_id"))
DELETE_RUN = delete(RUNS).where(RUNS.c.id == bindparam("run_id"), RUNS.c.thread_id == bindparam("thread_id"))

# Statements whose shape depends on the call (a filter, an order, a list of ids), built per
# call here; they run in transaction functions through ``Connection.execute``.


def runs_of_thread(thread_id: str, limit: int, offset: int, status: str | None, newest: bool) -> Select[Any]:
    """A page of a thread's runs, oldest first (``newest``: newest first), of ``status`` if given."""
    runs = RUNS.c
    order = (runs.created_at.desc(), runs.id.desc()) if newest else (runs.created_at, runs.id)
    statement = select(RUNS).where(runs.thread_id == thread_id)
    if status is not None:
        statement = statement.where(runs.status == status)
    return statement.order_by(*order).limit(limit).offset(offset)


def cancel_requests_of(run_ids: Sequence[str]) -> Select[Any]:
    """The recorded stop requests of ``run_ids``: (id, action) of those that have one."""
    runs = RUNS.c
    return select(runs.id, runs.cancel_requested).where(runs.id.in_(run_ids), runs.cancel_requested.is_not(None))


def live_runs() -> Select[Any]:
    """Every live run's id, thread and owner (what startup recovery judges)."""
    return select(RUNS.c.id, RUNS.c.thread_id, RUNS.c.owner).where(RUNS.c.status.in_(LIVE))


TEMPORARY = "temporary"
"""The key a stateless run's stored request carries (``true``) when its thread is to be
deleted once it ended (LangGraph's ``on_completion: delete``; LangGraph's name for it)."""


def temporary_runs_left() -> Select[Any]:
    """The thread and owner of each run marked :data:`TEMPORARY` whose thread has no live
    run: a thread to delete once its owner is gone (what startup recovery judges)."""
    runs, live = RUNS.c, RUNS.alias("live_run").c
    has_live_run = select(live.id).where(live.thread_id == runs.thread_id, live.status.in_(LIVE)).exists()
    marked = runs.input[TEMPORARY].as_boolean().is_(True)
    return select(runs.thread_id, runs.owner).where(marked, ~has_live_run)


def busy_threads_without_live_run() -> Select[Any]:
    """The ids of threads ``busy`` with no live run: nothing will ever clear them."""
    threads, runs = THREADS.c, RUNS.c
    has_live_run = select(runs.id).where(runs.thread_id == threads.id, runs.status.in_(LIVE)).exists()
    return select(threads.id).where(threads.status == ThreadStatus.BUSY.value, ~has_live_run)


def last_run_status(thread_id: str) -> Select[Any]:
    """The status of a thread's newest run."""
    runs = RUNS.c
    return (
        select(runs.status).where(runs.thread_id == thread_id).order_by(runs.created_at.desc(), runs.id.desc()).limit(1)
    )


def settle_thread(thread_id: str, status: ThreadStatus, now: Any) -> Update:
    """A thread still ``busy`` given ``status``."""
    threads = THREADS.c
    return (
        update(THREADS)
        .where(threads.id == thread_id, threads.status == ThreadStatus.BUSY.value)
        .values(status=status.value, updated_at=now)
    )
