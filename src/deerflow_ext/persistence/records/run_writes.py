"""A run's writes and reads as transaction functions (``transactions``): SQLite's hot path
(its insert, start and end, each a transaction of one to three statements), and on either
database the stop requests, the run listings and the deletes.

PostgreSQL's hot path is ``pg_statements``' one-statement forms of the same writes, sent
from the event loop (``store``); the values bound to them are built here for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from .. import sqlite_statements
from ..models import ThreadStatus, utcnow
from .statements import (
    CANCEL_RUN,
    DELETE_EVENTS_OF_RUN,
    DELETE_RUN,
    INSERT_OUTBOX,
    INSERT_RUN,
    INTERRUPT_OLDER,
    START_RUN,
    THREAD_METADATA,
    UPDATE_RUN,
    UPDATE_THREAD,
    cancel_requests_of,
    runs_of_thread,
)
from .thread_writes import set_metadata
from .values import RunRecord

__all__ = [
    "cancel_requests",
    "delete_run",
    "list_runs",
    "request_cancel",
    "sqlite_finish_run",
    "sqlite_insert_run",
    "sqlite_start_run",
    "thread_values",
]


def sqlite_insert_run(
    conn: Connection, new_run: dict[str, Any], older: dict[str, Any], thread_defaults: dict[str, Any] | None
) -> int | None:
    """SQLite's run insert (``HostStore.create_run``): the thread locked, its missing
    defaults filled in, the run inserted, and with an ``action`` the stop request on the
    thread's older live runs; how many were marked, or ``None`` without the thread."""
    thread_id = older["on_thread"]
    found = sqlite_statements.first(conn, THREAD_METADATA, {"thread_id": thread_id})
    if found is None:
        return None
    have = found[0] or {}
    missing = {key: value for key, value in (thread_defaults or {}).items() if key not in have}
    if missing:
        set_metadata(conn, thread_id, {**have, **missing})
    sqlite_statements.execute(conn, INSERT_RUN, {**new_run, "thread_id": thread_id})
    if older["action"] is None:
        return 0
    return sqlite_statements.execute(conn, INTERRUPT_OLDER, older)


def sqlite_start_run(conn: Connection, run_id: str, thread_id: str, now: Any) -> bool:
    """SQLite's start of a run (``HostStore.mark_started``): the run, if still pending, then
    its thread ``busy``."""
    if not sqlite_statements.execute(conn, START_RUN, {"run_id": run_id, "now": now}):
        return False
    busy = {"status": ThreadStatus.BUSY.value, "updated_at": now, "thread_id": thread_id}
    sqlite_statements.execute(conn, UPDATE_THREAD, busy)
    return True


def sqlite_finish_run(
    conn: Connection,
    run_id: str,
    values: dict[str, Any],
    thread_id: str | None,
    thread: dict[str, Any] | None,
    outbox: Mapping[str, Any] | None = None,
) -> None:
    """SQLite's end of a run (``HostStore.finish_run``): the run's row, then its thread's,
    then the webhook delivery it owes, if any (``webhook_table``)."""
    sqlite_statements.execute(conn, UPDATE_RUN, {**values, "run_id": run_id})
    if thread is not None:
        sqlite_statements.execute(conn, UPDATE_THREAD, {**thread, "thread_id": thread_id})
    if outbox is not None:
        conn.execute(INSERT_OUTBOX, dict(outbox))


def thread_values(status: str, title: str | None, state_values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a run's end writes on its thread."""
    values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
    if title:  # a run without a title keeps the thread's existing one
        values["title"] = title
    if state_values is not None:
        values["state_values"] = dict(state_values)
    return values


def list_runs(conn: Connection, thread_id: str, limit: int, offset: int, status: str | None, newest: bool) -> Any:
    return [RunRecord.of(r) for r in conn.execute(runs_of_thread(thread_id, limit, offset, status, newest))]


def delete_run(conn: Connection, thread_id: str, run_id: str) -> bool:
    params = {"run_id": run_id, "thread_id": thread_id}
    conn.execute(DELETE_EVENTS_OF_RUN, params)  # its journal with it
    return bool(conn.execute(DELETE_RUN, params).rowcount)


def request_cancel(conn: Connection, run_id: str, action: str) -> int:
    return int(conn.execute(CANCEL_RUN, {"run_id": run_id, "action": action}).rowcount)


def cancel_requests(conn: Connection, run_ids: Sequence[str]) -> dict[str, str]:
    return {run_id: str(action) for run_id, action in conn.execute(cancel_requests_of(run_ids))}
