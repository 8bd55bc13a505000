"""The statements of a thread hold on PostgreSQL (``pg_coordinator``): take, take over,
check, give back, find a dead holder, find abandoned threads.

Apart from the coordinator, which says the protocol (docs/SCALE-OUT.md, "Thread admission
and the finalizing barrier"): these are its words in SQL. Each is text, not Core, as the
locks they take and read (``pg_try_advisory_lock``, ``pg_locks``) are PostgreSQL's own, and
a take joins the lock with the takeover's writes in one round trip. What a takeover writes
on runs and threads is the store's "mark a run interrupted"
(``persistence.records.pg_statements``), run states from the ``models`` enums.
"""

from __future__ import annotations

from sqlalchemy import text

from ..persistence.models import RunStatus
from ..persistence.records.pg_statements import (
    OWED_RETURNING,
    interrupt_busy_thread,
    interrupt_runs,
    owed_webhooks,
    status_is,
)

__all__ = [
    "ABANDONED_THREADS",
    "DEAD_HOLDER",
    "STILL_HELD",
    "TAKE",
    "TAKEN_OVER_WHY",
    "TAKE_OVER",
    "UNLOCK",
    "lock_parts",
]


def _orphans(held: str) -> str:
    """Runs left running on a thread whose lock is held here, and the queued runs of their
    processes on it, interrupted; the thread too, if it was busy. An UPDATE checks each row
    it found against that row's newest version, so a run that ended (and whose thread was
    given back) after the statement's snapshot was taken is left alone, and an update that
    matches nothing writes nothing. It reads a thread's live runs alone
    (``ix_runs_live_thread_id``, migration 0005). ``held`` makes it conditional on the lock
    just taken. The interrupted runs' webhooks are owed in the same statement
    (``owed_webhooks``: an insert only when such a run had one)."""
    running, pending = status_is(RunStatus.RUNNING), status_is(RunStatus.PENDING)
    dead = interrupt_runs(f"{held}thread_id = :t AND {running} AND owner <> :o", returning=f"owner, {OWED_RETURNING}")
    queued = interrupt_runs(
        f"thread_id = :t AND {pending} AND id <> :r AND owner IN (SELECT owner FROM dead)", returning=OWED_RETURNING
    )
    busy = interrupt_busy_thread("id = :t AND EXISTS (SELECT 1 FROM dead)")
    owed = f"owed_dead AS ({owed_webhooks('dead')}), owed_queued AS ({owed_webhooks('queued')})"
    return f"dead AS ({dead}), queued AS ({queued}), busy AS ({busy}), {owed} "


_INTERRUPTED = "ARRAY(SELECT id FROM dead) || ARRAY(SELECT id FROM queued), ARRAY(SELECT DISTINCT owner FROM dead)"

TAKEN_OVER_WHY = "the process running it stopped before it finished (its thread was taken over)"
"""The error a run interrupted by a takeover is ended with (bound as ``:why``)."""

TAKE = text(
    "WITH lock AS MATERIALIZED (SELECT pg_try_advisory_lock(:k) AS got), "
    + _orphans(held="(SELECT got FROM lock) AND ")
    + f"SELECT got, {_INTERRUPTED} FROM lock"
)
"""A free thread, the common case, in one round trip: the try-lock, then (only if it was
granted) the takeover of whatever the last holder left running."""

TAKE_OVER = text("WITH " + _orphans(held="") + f"SELECT {_INTERRUPTED}")
"""The takeover alone, once a waited-for lock is held."""

UNLOCK = text("SELECT pg_advisory_unlock(:k)")

STILL_HELD = text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() "
    "AND classid = :classid AND objid = :objid AND objsubid = 1"
)
"""Whether this session still holds the lock (``lock_parts`` of its key)."""

DEAD_HOLDER = text(
    "SELECT k.pid FROM pg_locks k JOIN pg_stat_activity a ON a.pid = k.pid "
    "LEFT JOIN gateway_processes p ON a.application_name = :prefix || md5(p.owner) "
    "WHERE k.locktype = 'advisory' AND k.granted AND k.classid = :classid AND k.objid = :objid AND k.objsubid = 1 "
    "AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND starts_with(a.application_name, :prefix) AND a.application_name <> :mine "
    "AND (p.owner IS NULL OR p.expires_at < clock_timestamp())"
)
"""The backend holding a thread's lock, if it is a Gateway's whose heartbeat expired or
whose heartbeat row is gone (never this process's own)."""

ABANDONED_THREADS = text(
    "SELECT DISTINCT r.thread_id FROM runs r LEFT JOIN gateway_processes p ON p.owner = r.owner "
    f"WHERE {status_is(RunStatus.RUNNING, 'r.status')} AND r.owner <> :me "
    "AND (p.owner IS NULL OR p.expires_at < clock_timestamp())"
)
"""Threads with a run left running by a process that is gone (expired or forgotten heartbeat)."""


def lock_parts(key: int) -> dict[str, int]:
    """``pg_locks`` shows a bigint advisory key as (classid = high 32 bits, objid = low 32 bits)."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    return {"classid": unsigned >> 32, "objid": unsigned & 0xFFFFFFFF}
