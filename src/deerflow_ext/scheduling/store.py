"""Reading and writing crons, and claiming the due ones.

Every operation is a transaction function run by the host store's :class:`Transactions`
(``persistence.transactions``): SQLite's on its one loop-first thread, PostgreSQL's through
the async engine's ``run_sync``, so a claim never blocks the event loop longer than the
store's other transactions do.

:meth:`CronStore.claim_due` is the one place a tick is decided: it selects the enabled rows
whose ``next_run_date`` has come, locking them (``FOR UPDATE SKIP LOCKED``: a row another
process is claiming is skipped, not waited for), and in the same transaction moves each to
its next tick after *now* (a cron whose Gateway was down for five ticks fires once), or to
NULL past its ``end_time``. Only after the commit does the caller start the runs. SQLite
renders the same statement without the lock clause and serialises writers itself; the
transaction's first statement writes, so it holds the write lock before it reads.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from sqlalchemy import ColumnElement, Connection, and_, delete, func, insert, select, update

from ..persistence.cron_table import CRON_COLUMNS, CRONS
from ..persistence.json_match import json_contains
from ..persistence.owner_filter import owner_condition
from ..persistence.stored_times import stored_utc
from ..persistence.transactions import Transactions
from .schedules import ScheduleError, next_tick

__all__ = ["CronDraft", "CronNotFoundError", "CronQuery", "CronRecord", "CronStore", "Due", "SortBy"]

SortBy = Literal["cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"]

T = TypeVar("T")

_CLAIM_BATCH = 100
"""Rows one claim takes at most; more due rows are taken by the next wake, at once."""


class CronNotFoundError(LookupError):
    def __init__(self, cron_id: str) -> None:
        super().__init__(f"cron {cron_id} not found")


@dataclass(frozen=True)
class CronRecord:
    cron_id: str
    assistant_id: str
    thread_id: str | None
    on_run_completed: str | None
    end_time: datetime | None
    schedule: str
    timezone: str | None
    created_at: datetime
    updated_at: datetime
    payload: Mapping[str, Any]
    user_id: str | None
    next_run_date: datetime | None
    metadata: Mapping[str, Any]
    enabled: bool

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> CronRecord:
        return cls(
            cron_id=row["cron_id"],
            assistant_id=row["assistant_id"],
            thread_id=row["thread_id"],
            on_run_completed=row["on_run_completed"],
            end_time=stored_utc(row["end_time"]),
            schedule=row["schedule"],
            timezone=row["timezone"],
            created_at=stored_utc(row["created_at"]) or datetime.min.replace(tzinfo=UTC),
            updated_at=stored_utc(row["updated_at"]) or datetime.min.replace(tzinfo=UTC),
            payload=dict(row["payload"] or {}),
            user_id=row["user_id"],
            next_run_date=stored_utc(row["next_run_date"]),
            metadata=dict(row["metadata"] or {}),
            enabled=bool(row["enabled"]),
        )


@dataclass(frozen=True)
class Due:
    """A claimed tick: the cron as it was when claimed, and the tick it fires for."""

    cron: CronRecord
    tick: datetime


@dataclass(frozen=True)
class CronDraft:
    """A new cron; its first tick is computed from ``now`` when it is written."""

    assistant_id: str
    schedule: str
    payload: Mapping[str, Any]
    thread_id: str | None = None
    timezone: str | None = None
    end_time: datetime | None = None
    on_run_completed: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True
    user_id: str | None = None


@dataclass(frozen=True)
class CronQuery:
    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    limit: int = 10
    offset: int = 0
    sort_by: SortBy = "created_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: Sequence[str] = ()
    # An authorization handler's filter on the metadata (``persistence.owner_filter``).
    filters: Mapping[str, Any] | None = None


def _first_date(schedule: str, timezone: str | None, end_time: datetime | None, now: datetime) -> datetime | None:
    """The next tick after ``now``; None when there is none before ``end_time``, or none at all
    (a stored schedule croniter no longer reads must not stop the claim of every other cron)."""
    try:
        tick = next_tick(schedule, timezone, now)
    except ScheduleError:
        return None
    return None if end_time is not None and tick > end_time else tick


def _insert(conn: Connection, row: dict[str, Any]) -> None:
    conn.execute(insert(CRONS).values(**row))


def _mine(conn: Connection, cron_id: str, filters: Mapping[str, Any] | None) -> ColumnElement[bool]:
    """This cron, if its metadata matches ``filters`` (an authorization handler's)."""
    return and_(CRONS.c.cron_id == cron_id, owner_condition(CRONS.c["metadata"], filters, conn.dialect.name))


def _get(conn: Connection, cron_id: str, filters: Mapping[str, Any] | None = None) -> CronRecord | None:
    row = conn.execute(select(CRONS).where(_mine(conn, cron_id, filters))).first()
    return CronRecord.of(dict(row._mapping)) if row is not None else None


def _conditions(query: CronQuery, dialect: str) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [json_contains(CRONS.c["metadata"], query.metadata, dialect)]
    if query.assistant_id is not None:
        conditions.append(CRONS.c.assistant_id == query.assistant_id)
    if query.thread_id is not None:
        conditions.append(CRONS.c.thread_id == query.thread_id)
    if query.enabled is not None:
        conditions.append(CRONS.c.enabled == query.enabled)
    if query.filters:
        conditions.append(owner_condition(CRONS.c["metadata"], query.filters, dialect))
    return conditions


def _search(conn: Connection, query: CronQuery) -> list[dict[str, Any]]:
    names = [c for c in CRON_COLUMNS if not query.select or c in query.select]
    column = CRONS.c[query.sort_by]
    order = column.asc() if query.sort_order == "asc" else column.desc()
    tie = CRONS.c.cron_id.asc() if query.sort_order == "asc" else CRONS.c.cron_id.desc()
    statement = (
        select(*(CRONS.c[n] for n in names))
        .where(*_conditions(query, conn.dialect.name))
        .order_by(order, tie)
        .limit(query.limit)
        .offset(query.offset)
    )
    return [dict(row._mapping) for row in conn.execute(statement)]


def _count(conn: Connection, query: CronQuery) -> int:
    statement = select(func.count()).select_from(CRONS).where(*_conditions(query, conn.dialect.name))
    return int(conn.execute(statement).scalar_one())


def _update(
    conn: Connection, cron_id: str, changes: dict[str, Any], now: datetime, filters: Mapping[str, Any] | None = None
) -> CronRecord:
    current = _get(conn, cron_id, filters)
    if current is None:
        raise CronNotFoundError(cron_id)
    values = dict(changes)
    if "payload" in values:
        values["payload"] = {**current.payload, **values["payload"]}
    schedule = values.get("schedule", current.schedule)
    timezone = values.get("timezone", current.timezone)
    end_time = values.get("end_time", current.end_time)
    values["next_run_date"] = _first_date(schedule, timezone, end_time, now)
    values["updated_at"] = now
    conn.execute(update(CRONS).where(CRONS.c.cron_id == cron_id).values(**values))
    found = _get(conn, cron_id)
    assert found is not None  # written just above, in this transaction
    return found


def _delete(conn: Connection, cron_id: str, filters: Mapping[str, Any] | None = None) -> bool:
    return conn.execute(delete(CRONS).where(_mine(conn, cron_id, filters))).rowcount > 0


def _earliest(conn: Connection) -> datetime | None:
    statement = select(func.min(CRONS.c.next_run_date)).where(CRONS.c.enabled.is_(True))
    return stored_utc(conn.execute(statement).scalar_one_or_none())


def _claim(conn: Connection, now: datetime, limit: int) -> list[Due]:
    if conn.dialect.name == "sqlite":
        # Take the write lock first: a read that later writes would have to upgrade its lock.
        conn.execute(update(CRONS).where(CRONS.c.cron_id.is_(None)).values(enabled=CRONS.c.enabled))
    statement = (
        select(CRONS)
        .where(CRONS.c.enabled.is_(True), CRONS.c.next_run_date <= now)
        .order_by(CRONS.c.next_run_date)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    claimed: list[Due] = []
    for row in conn.execute(statement).all():
        cron = CronRecord.of(dict(row._mapping))
        assert cron.next_run_date is not None  # selected by it
        following = _first_date(cron.schedule, cron.timezone, cron.end_time, now)
        conn.execute(update(CRONS).where(CRONS.c.cron_id == cron.cron_id).values(next_run_date=following))
        if cron.end_time is None or cron.next_run_date <= cron.end_time:
            claimed.append(Due(cron, cron.next_run_date))
    return claimed


class CronStore:
    """The crons of one database, over the host store's transactions.

    ``notify``: ``(channel, payload)`` a change (create, update, delete) sends with
    ``pg_notify`` in its own transaction on PostgreSQL, so every process's scheduler
    listening there looks again (``runtime.signals``); none on SQLite (one process)."""

    def __init__(self, transactions: Transactions, notify: tuple[str, str] | None = None) -> None:
        self._tx = transactions
        self._notify = notify

    def _changing(self, fn: Callable[..., T]) -> Callable[..., T]:
        notify = self._notify
        if notify is None:
            return fn

        def changing(conn: Connection, *args: Any) -> T:
            found = fn(conn, *args)
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_notify(*notify)))
            return found

        return changing

    async def create(self, draft: CronDraft, now: datetime) -> CronRecord:
        row = {
            "cron_id": str(uuid.uuid4()),
            "assistant_id": draft.assistant_id,
            "thread_id": draft.thread_id,
            "on_run_completed": draft.on_run_completed,
            "end_time": draft.end_time,
            "schedule": draft.schedule,
            "timezone": draft.timezone,
            "created_at": now,
            "updated_at": now,
            "payload": dict(draft.payload),
            "user_id": draft.user_id,
            "next_run_date": _first_date(draft.schedule, draft.timezone, draft.end_time, now),
            "metadata": dict(draft.metadata),
            "enabled": draft.enabled,
        }
        await self._tx.write(self._changing(_insert), row)
        return CronRecord.of(row)

    async def get(self, cron_id: str, filters: Mapping[str, Any] | None = None) -> CronRecord | None:
        return await self._tx.read(_get, cron_id, filters)

    async def search(self, query: CronQuery) -> list[dict[str, Any]]:
        """The page's crons, only the ``select`` columns (all when empty)."""
        return await self._tx.read(_search, query)

    async def count(self, query: CronQuery) -> int:
        return await self._tx.read(_count, query)

    async def update(
        self, cron_id: str, changes: Mapping[str, Any], now: datetime, filters: Mapping[str, Any] | None = None
    ) -> CronRecord:
        """Replace the columns ``changes`` names (``payload`` is merged into the stored one)
        and recompute the next tick from ``now``; :class:`CronNotFoundError` if none (or
        its metadata does not match ``filters``)."""
        return await self._tx.write(self._changing(_update), cron_id, dict(changes), now, filters)

    async def delete(self, cron_id: str, filters: Mapping[str, Any] | None = None) -> bool:
        return await self._tx.write(self._changing(_delete), cron_id, filters)

    async def earliest(self) -> datetime | None:
        """The earliest ``next_run_date`` of an enabled cron: when the scheduler wakes."""
        return await self._tx.read(_earliest)

    async def claim_due(self, now: datetime, limit: int = _CLAIM_BATCH) -> list[Due]:
        """The ticks due at ``now``, each claimed by this call alone (see the module)."""
        return await self._tx.write(_claim, now, limit)

    async def set_next_run_date(self, cron_id: str, when: datetime | None) -> None:
        """Move a cron's next tick (operators and tests: fire it now, or hold it)."""
        await self._tx.write(self._changing(_set_next), cron_id, when)


def _set_next(conn: Connection, cron_id: str, when: datetime | None) -> None:
    if conn.execute(update(CRONS).where(CRONS.c.cron_id == cron_id).values(next_run_date=when)).rowcount == 0:
        raise CronNotFoundError(cron_id)
