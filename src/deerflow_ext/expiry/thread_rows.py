"""The thread rows' side of expiry: transaction functions (``persistence.transactions``) that
arm a thread's time to live, read it back, and take threads for deletion or pruning.

A thread's time to live counts from its last activity: a run's start and end, a metadata
update and the ``ttl`` itself move ``updated_at``. Nothing on a run's path writes
``expires_at`` (a run pays nothing for TTL): the sweep takes the rows whose ``expires_at``
has come and, for each, looks at ``updated_at`` first. A thread active since it was armed is
re-armed at ``updated_at + ttl`` and left alone; one still running a run (``pending`` or
``running`` in any process) is re-armed a ``ttl`` from now and left alone too (a run's
thread is never deleted or pruned from under it; the run's end moves ``updated_at`` on);
the rest are taken.

One process takes a row: the sweep selects with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL (a
row another process's sweep holds is skipped, not waited for) and, in the same transaction,
deletes (``delete``) or re-arms (``keep_latest``: pruned again only after another ``ttl``)
what it took. SQLite has one process and one writer; its transaction writes first, so it
holds the write lock before it reads. A run created on a thread meanwhile waits for the
thread row's lock (the run's insert references it) and then finds it gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, Table, delete, select, update

from ..persistence.models import LIVE_RUN_STATUSES, RunRow, ThreadRow
from ..persistence.records import ThreadTTL

__all__ = ["Taken", "arm_ttl", "take_expired", "take_for_prune", "ttl_of"]

_THREADS = cast(Table, ThreadRow.__table__)
_RUNS = cast(Table, RunRow.__table__)
_LIVE = tuple(status.value for status in LIVE_RUN_STATUSES)


@dataclass(frozen=True)
class Taken:
    """Threads one transaction took: rows already deleted (their checkpoints go next) and
    threads kept whose checkpoints are to be pruned to the newest; ``examined``: the expired
    rows it looked at, the re-armed ones (active since, or running a run) included."""

    deleted: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    examined: int = 0

    def __len__(self) -> int:
        return len(self.deleted) + len(self.kept)


def _utc(value: datetime) -> datetime:
    # SQLite hands timestamps back without their zone; every stored time is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def arm_ttl(conn: Connection, thread_id: str, ttl: ThreadTTL, now: datetime) -> bool:
    """Give a thread ``ttl``, counted from ``now``; False when there is no such thread."""
    values = {**ttl.columns(now), "updated_at": now}
    return bool(conn.execute(update(_THREADS).where(_THREADS.c.id == thread_id).values(**values)).rowcount)


def ttl_of(conn: Connection, thread_id: str) -> dict[str, Any] | None:
    """LangGraph's ``ttl`` of a thread (``strategy``, ``ttl_minutes``, ``expires_at``: when it
    expires if nothing happens on it), or None when it has none."""
    threads = _THREADS.c
    row = conn.execute(
        select(threads.ttl_strategy, threads.ttl_minutes, threads.updated_at, threads.expires_at).where(
            threads.id == thread_id
        )
    ).first()
    if row is None or row.ttl_minutes is None or row.expires_at is None:
        return None
    due = max(_utc(row.expires_at), _utc(row.updated_at) + timedelta(minutes=row.ttl_minutes))
    return {"strategy": row.ttl_strategy, "ttl_minutes": row.ttl_minutes, "expires_at": due.isoformat()}


def _has_live_run(conn: Connection, thread_id: str) -> bool:
    runs = _RUNS.c
    found = conn.execute(select(runs.id).where(runs.thread_id == thread_id, runs.status.in_(_LIVE)).limit(1)).first()
    return found is not None


def _delete_rows(conn: Connection, thread_id: str) -> None:
    # Runs before their thread: SQLite honours ON DELETE CASCADE only with the foreign_keys
    # pragma (on, for the host's connections: a thread's crons go with it).
    conn.execute(delete(_RUNS).where(_RUNS.c.thread_id == thread_id))
    conn.execute(delete(_THREADS).where(_THREADS.c.id == thread_id))


def _write_first(conn: Connection) -> None:
    """SQLite: take the write lock before reading (a read that later writes would have to
    upgrade its lock, and could fail where waiting would have done)."""
    if conn.dialect.name == "sqlite":
        conn.execute(update(_THREADS).where(_THREADS.c.id.is_(None)).values(status=_THREADS.c.status))


def take_expired(conn: Connection, now: datetime, limit: int) -> Taken:
    """Up to ``limit`` threads whose time to live has passed, taken as the module says."""
    _write_first(conn)
    threads = _THREADS.c
    statement = (
        select(threads.id, threads.ttl_strategy, threads.ttl_minutes, threads.updated_at, threads.expires_at)
        .where(threads.expires_at <= now)
        .order_by(threads.expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    deleted: list[str] = []
    kept: list[str] = []
    rows = conn.execute(statement).all()
    for row in rows:
        minutes = row.ttl_minutes if row.ttl_minutes is not None else 0.0
        due = _utc(row.updated_at) + timedelta(minutes=minutes)
        if due > now:  # active since it was armed: counts from its last activity
            _rearm(conn, row.id, due)
        elif _has_live_run(conn, row.id):  # never from under a run
            _rearm(conn, row.id, now + timedelta(minutes=minutes))
        elif row.ttl_strategy == "keep_latest":
            _rearm(conn, row.id, now + timedelta(minutes=minutes))
            kept.append(row.id)
        else:
            _delete_rows(conn, row.id)
            deleted.append(row.id)
    return Taken(tuple(deleted), tuple(kept), len(rows))


def _rearm(conn: Connection, thread_id: str, when: datetime) -> None:
    conn.execute(update(_THREADS).where(_THREADS.c.id == thread_id).values(expires_at=when))


def take_for_prune(conn: Connection, thread_ids: Sequence[str], strategy: str) -> Taken:
    """The threads of ``thread_ids`` that exist and run nothing, locked (``FOR UPDATE``: a
    run being created on one waits), their rows deleted for ``delete``; the others are left
    out (a thread running a run is not pruned from under it)."""
    _write_first(conn)
    threads = _THREADS.c
    found = conn.execute(
        select(threads.id).where(threads.id.in_(list(dict.fromkeys(thread_ids)))).order_by(threads.id).with_for_update()
    ).all()
    taken = [row.id for row in found if not _has_live_run(conn, row.id)]
    if strategy != "delete":
        return Taken(kept=tuple(taken))
    for thread_id in taken:
        _delete_rows(conn, thread_id)
    return Taken(deleted=tuple(taken))
