"""Reading and writing the webhook outbox (``persistence.webhook_table``) outside a run's end.

Each operation is a transaction function run by the host store's :class:`Transactions`, as
the crons' are. :meth:`Outbox.claim` is the one place an attempt is decided: it selects the
pending rows that are due, locking them (``FOR UPDATE SKIP LOCKED`` on PostgreSQL: a row
another process is claiming is skipped, not waited for), and in the same transaction counts
the attempt and moves each row's ``next_attempt_at`` a lease ahead, so no other process
claims it while this one sends it. A process killed mid-attempt leaves the row pending: it is
claimed again once the lease is over, which is why delivery is at-least-once (the receiver
dedupes on ``webhook-id``). SQLite has one process; its claim writes first, so it holds the
write lock before it reads.

Settled rows (``delivered``, ``failed``) are the operator's record (``GET /api/webhooks``)
for ``webhooks.keep_settled_days``; :meth:`Outbox.prune_settled` then deletes them, in
batches, oldest settled first. A pending row is never pruned, however old: it is still owed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, func, select, update

from ..persistence.stored_times import stored_utc
from ..persistence.transactions import Transactions
from ..persistence.webhook_table import WEBHOOK_OUTBOX
from .order import PENDING

__all__ = ["DELIVERED", "FAILED", "Claimed", "Outbox"]

DELIVERED = "delivered"
FAILED = "failed"
_T = WEBHOOK_OUTBOX


@dataclass(frozen=True)
class Claimed:
    """One attempt this process owns: the row as claimed, its attempt number counted."""

    delivery_id: str
    run_id: str
    url: str
    payload: Mapping[str, Any]
    attempts: int


class Outbox:
    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    async def earliest(self) -> datetime | None:
        """When the next pending row is due (the worker's one query per wake)."""
        return await self._tx.read(_earliest)

    async def claim(self, now: datetime, lease: float, limit: int) -> list[Claimed]:
        return await self._tx.write(_claim, now, now + timedelta(seconds=lease), limit)

    async def delivered(self, delivery_id: str, status_code: int, now: datetime) -> None:
        await self._tx.write(_settle, delivery_id, {"status": DELIVERED, "last_status_code": status_code}, now)

    async def attempt_failed(
        self, delivery_id: str, status_code: int | None, error: str, retry_at: datetime | None, now: datetime
    ) -> None:
        """Record a failed attempt: due again at ``retry_at``, or ``failed`` for good (None)."""
        values: dict[str, Any] = {"last_status_code": status_code, "last_error": error[:2000]}
        if retry_at is None:
            values["status"] = FAILED
        else:
            values["next_attempt_at"] = retry_at
        await self._tx.write(_settle, delivery_id, values, now)

    async def prune_settled(self, settled_before: datetime, batch: int = 500) -> int:
        """Delete the rows settled before ``settled_before``, ``batch`` to a transaction,
        never on the event loop (``write_aside``: how many there are is the data's doing);
        how many were deleted."""
        deleted = 0
        while True:
            count = await self._tx.write_aside(_prune, settled_before, batch)
            deleted += count
            if count < batch:
                return deleted

    async def counts(self) -> dict[str, int]:
        return await self._tx.read(_counts)

    async def listing(self, status: str | None, run_id: str | None, limit: int) -> list[dict[str, Any]]:
        return await self._tx.read(_listing, status, run_id, limit)


def _earliest(conn: Connection) -> datetime | None:
    statement = select(func.min(_T.c.next_attempt_at)).where(_T.c.status == PENDING)
    return stored_utc(conn.execute(statement).scalar_one_or_none())


def _claim(conn: Connection, now: datetime, lease_until: datetime, limit: int) -> list[Claimed]:
    if conn.dialect.name == "sqlite":
        # Take the write lock first: a read that later writes would have to upgrade its lock.
        conn.execute(update(_T).where(_T.c.delivery_id.is_(None)).values(attempts=_T.c.attempts))
    statement = (
        select(_T.c.delivery_id, _T.c.run_id, _T.c.url, _T.c.payload, _T.c.attempts)
        .where(_T.c.status == PENDING, _T.c.next_attempt_at <= now)
        .order_by(_T.c.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    claimed = []
    for row in conn.execute(statement).all():
        attempts = int(row.attempts) + 1
        conn.execute(
            update(_T)
            .where(_T.c.delivery_id == row.delivery_id)
            .values(attempts=attempts, next_attempt_at=lease_until, updated_at=now)
        )
        claimed.append(Claimed(row.delivery_id, row.run_id, row.url, dict(row.payload or {}), attempts))
    return claimed


def _settle(conn: Connection, delivery_id: str, values: dict[str, Any], now: datetime) -> None:
    conn.execute(
        update(_T).where(_T.c.delivery_id == delivery_id, _T.c.status == PENDING).values(**values, updated_at=now)
    )


def _prune(conn: Connection, settled_before: datetime, batch: int) -> int:
    oldest = (
        select(_T.c.delivery_id)
        .where(_T.c.status.in_((DELIVERED, FAILED)), _T.c.updated_at < settled_before)
        .order_by(_T.c.updated_at)
        .limit(batch)
    )
    if conn.dialect.name != "sqlite":
        oldest = oldest.with_for_update(skip_locked=True)  # two processes pruning take different rows
    ids = list(conn.execute(oldest).scalars())
    if ids:
        conn.execute(delete(_T).where(_T.c.delivery_id.in_(ids)))
    return len(ids)


def _counts(conn: Connection) -> dict[str, int]:
    found = {status: 0 for status in (PENDING, DELIVERED, FAILED)}
    for status, count in conn.execute(select(_T.c.status, func.count()).group_by(_T.c.status)):
        found[str(status)] = int(count)
    return found


def _listing(conn: Connection, status: str | None, run_id: str | None, limit: int) -> list[dict[str, Any]]:
    statement = select(
        _T.c.delivery_id,
        _T.c.run_id,
        _T.c.thread_id,
        _T.c.url,
        _T.c.status,
        _T.c.attempts,
        _T.c.next_attempt_at,
        _T.c.created_at,
        _T.c.updated_at,
        _T.c.last_status_code,
        _T.c.last_error,
    )
    if status is not None:
        statement = statement.where(_T.c.status == status)
    if run_id is not None:
        statement = statement.where(_T.c.run_id == run_id)
    statement = statement.order_by(_T.c.created_at.desc(), _T.c.delivery_id).limit(limit)
    out = []
    for row in conn.execute(statement):
        item = dict(row._mapping)
        for key in ("next_attempt_at", "created_at", "updated_at"):
            stamp = stored_utc(item[key])
            item[key] = None if stamp is None else stamp.isoformat()
        out.append(item)
    return out
