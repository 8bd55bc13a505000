"""The run journal's writes and reads as transaction functions (``transactions``).

A run's events are appended in one transaction as the run ends: its thread's last ``seq``
read, then every row inserted with one ``executemany``. The thread is held by the run
(``runtime.coordinator``), so no other run of the thread appends meanwhile; the primary
key (thread, seq) refuses a duplicate if that ever failed.

The readers' "changed runs" feed orders runs by their **change position**, the time of
their last status change (``finished_at``, else ``started_at``, else ``created_at``), then
id: a status change moves a run forward in the feed; nothing else does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, insert, or_, select

from ..run_events_table import RUN_EVENTS
from .statements import RUNS

__all__ = ["CHANGED_AT", "append_events", "changed_runs", "run_events", "run_of"]

CHANGED_AT = func.coalesce(RUNS.c.finished_at, RUNS.c.started_at, RUNS.c.created_at)
"""A run's change position (the time its status last changed)."""

_INSERT = insert(RUN_EVENTS)
_RUN_COLUMNS = (
    RUNS.c.id,
    RUNS.c.thread_id,
    RUNS.c.status,
    RUNS.c.created_at,
    RUNS.c.error,
    RUNS.c.user_id,
    RUNS.c.cancel_requested,
    CHANGED_AT.label("changed_at"),
)


def append_events(conn: Connection, thread_id: str, rows: Sequence[dict[str, Any]]) -> int:
    """Number ``rows`` after the thread's last event and insert them; the last ``seq``."""
    last = conn.execute(select(func.max(RUN_EVENTS.c.seq)).where(RUN_EVENTS.c.thread_id == thread_id)).scalar()
    seq = int(last or 0)
    numbered = []
    for row in rows:
        seq += 1
        numbered.append({**row, "thread_id": thread_id, "seq": seq})
    if numbered:
        conn.execute(_INSERT, numbered)
    return seq


def changed_runs(
    conn: Connection, user_id: str | None, after: tuple[datetime, str] | None, before: datetime | None, limit: int
) -> list[Any]:
    """Up to ``limit`` runs of ``user_id`` (every user's with ``None``) whose change position
    is after ``after`` (position, run id) and, with ``before``, earlier than it."""
    statement = select(*_RUN_COLUMNS)
    if user_id is not None:
        statement = statement.where(RUNS.c.user_id == user_id)
    if after is not None:
        at, run_id = after
        statement = statement.where(or_(CHANGED_AT > at, and_(CHANGED_AT == at, RUNS.c.id > run_id)))
    if before is not None:
        statement = statement.where(CHANGED_AT < before)
    return list(conn.execute(statement.order_by(CHANGED_AT, RUNS.c.id).limit(limit)))


def run_of(conn: Connection, thread_id: str, run_id: str, user_id: str | None) -> Any:
    """The run, when it is on ``thread_id`` and (with a ``user_id``) that user's; else None."""
    statement = select(*_RUN_COLUMNS).where(RUNS.c.id == run_id, RUNS.c.thread_id == thread_id)
    if user_id is not None:
        statement = statement.where(RUNS.c.user_id == user_id)
    return conn.execute(statement).first()


def run_events(conn: Connection, thread_id: str, run_id: str, after_seq: int | None, limit: int) -> list[Any]:
    """Up to ``limit`` of the run's events after ``after_seq``, in ``seq`` order."""
    events = RUN_EVENTS.c
    statement = select(RUN_EVENTS).where(events.thread_id == thread_id, events.run_id == run_id)
    if after_seq is not None:
        statement = statement.where(events.seq > after_seq)
    return list(conn.execute(statement.order_by(events.seq).limit(limit)))
