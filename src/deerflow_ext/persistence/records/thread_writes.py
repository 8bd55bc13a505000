"""A thread's writes that are transactions of their own: its metadata merged, its state
values (for search) set, and the thread deleted with its runs. Transaction functions
(``transactions``): written once, run on either database's connection."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from .. import sqlite_statements
from ..models import utcnow
from ..owner_filter import owner_condition
from .statements import (
    DELETE_EVENTS_OF_THREAD,
    DELETE_RUNS_OF_THREAD,
    DELETE_THREAD,
    LIVE_RUN_OF_THREAD,
    LOCK_THREAD,
    SELECT_THREAD,
    SET_THREAD_METADATA,
    THREADS,
    UPDATE_THREAD,
)
from .values import ThreadRecord

__all__ = ["delete_thread", "merge_metadata", "set_metadata", "set_state_values"]


def _lock(conn: Connection, thread_id: str, filters: Mapping[str, Any] | None) -> Any:
    """The thread's row, locked, if it exists and (``filters``: an authorization handler's
    filter) its metadata matches."""
    if not filters:
        return conn.execute(LOCK_THREAD, {"thread_id": thread_id}).first()
    condition = owner_condition(THREADS.c.metadata, filters, conn.dialect.name)
    return conn.execute(SELECT_THREAD.where(condition).with_for_update(), {"thread_id": thread_id}).first()


def merge_metadata(
    conn: Connection, thread_id: str, patch: dict[str, Any], filters: Mapping[str, Any] | None = None
) -> ThreadRecord | None:
    """Merge ``patch`` into a thread's metadata inside ``conn``'s transaction, the row
    locked first (``FOR UPDATE`` on PostgreSQL; SQLite serialises writers anyway)."""
    found = _lock(conn, thread_id, filters)
    if found is None:
        return None
    merged = {**(found.metadata or {}), **patch}
    now = set_metadata(conn, thread_id, merged)
    return ThreadRecord(thread_id, found.title, found.status, found.created_at, now, merged)


def set_metadata(conn: Connection, thread_id: str, metadata: dict[str, Any]) -> datetime:
    """Write a locked thread's whole metadata; returns its new ``updated_at``."""
    now = utcnow()
    sqlite_statements.execute(conn, SET_THREAD_METADATA, {"thread_id": thread_id, "merged": metadata, "now": now})
    return now


def set_state_values(conn: Connection, thread_id: str, state_values: dict[str, Any]) -> None:
    sqlite_statements.execute(conn, UPDATE_THREAD, {"state_values": state_values, "thread_id": thread_id})


def delete_thread(conn: Connection, thread_id: str, filters: Mapping[str, Any] | None = None) -> bool | None:
    """Delete a thread and its runs: True; False when it does not exist; None when a run of
    it is live in any process (the database, not one process's memory, knows every
    process's runs). The thread row is locked first (``FOR UPDATE`` on PostgreSQL; SQLite
    serialises writers anyway), so a run being created on it concurrently waits for the
    outcome."""
    params = {"thread_id": thread_id}
    if _lock(conn, thread_id, filters) is None:
        return False
    if conn.execute(LIVE_RUN_OF_THREAD, params).first() is not None:
        return None
    conn.execute(DELETE_EVENTS_OF_THREAD, params)
    conn.execute(DELETE_RUNS_OF_THREAD, params)
    return bool(conn.execute(DELETE_THREAD, params).rowcount)
