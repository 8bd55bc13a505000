"""Thread search and count: LangGraph's filters (metadata, values, status, ids) and order, in SQL.

The metadata filter is containment, as LangGraph's thread search says it (``json_match``), so
the database answers a page with ``LIMIT``/``OFFSET`` and a count with ``COUNT(*)``: no row is
built to be filtered or counted in Python.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Connection, Row, Table, bindparam, func, select

from . import sqlite_statements
from .json_match import json_contains
from .models import ThreadRow
from .owner_filter import bound_owner_condition, filter_shape, filter_values, owner_condition

__all__ = ["ThreadQuery", "count_threads", "find_thread", "search_threads"]

_THREADS = cast(Table, ThreadRow.__table__)
_THREAD_SORT = {
    "thread_id": _THREADS.c.id,
    "status": _THREADS.c.status,
    "created_at": _THREADS.c.created_at,
    "updated_at": _THREADS.c.updated_at,
}


@dataclass(frozen=True)
class ThreadQuery:
    """A thread search: LangGraph's filters and order (``sort_by`` is a ``threads`` column)."""

    metadata: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    status: str | None = None
    ids: tuple[str, ...] | None = None
    sort_by: str = "updated_at"
    descending: bool = True
    limit: int = 100
    offset: int = 0
    # An authorization handler's filter on the metadata (``owner_filter``): the user's own.
    filters: Mapping[str, Any] | None = None


def _filtered(statement: Any, query: ThreadQuery, dialect: str) -> Any:
    if query.status is not None:
        statement = statement.where(_THREADS.c.status == query.status)
    if query.ids is not None:
        statement = statement.where(_THREADS.c.id.in_(query.ids))
    if query.metadata:
        statement = statement.where(json_contains(_THREADS.c.metadata, query.metadata, dialect))
    if query.values:  # the state's values but messages, as the last run's end wrote them
        statement = statement.where(json_contains(_THREADS.c.state_values, query.values, dialect))
    if query.filters:
        statement = statement.where(owner_condition(_THREADS.c.metadata, query.filters, dialect))
    return statement


def find_thread(conn: Connection, thread_id: str, filters: Mapping[str, Any]) -> Any | None:
    """The thread's row if it exists and its metadata matches ``filters`` (one statement:
    another user's thread is not found), with its columns by name. The statement is built
    once per filter shape and, on SQLite, sent compiled (``sqlite_statements``)."""
    dialect = conn.dialect.name
    statement = _thread_by_filter(filter_shape(filters), dialect)
    params = {"thread_id": thread_id, **filter_values(filters, dialect)}
    found = sqlite_statements.first(conn, statement, params)
    return None if found is None else _Columns(dict(zip(_THREADS.c.keys(), found, strict=True)))


class _Columns:
    """A row's columns as attributes (what ``ThreadRecord.of`` reads)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


@functools.lru_cache(maxsize=64)
def _thread_by_filter(shape: tuple[Any, ...], dialect: str) -> Any:
    condition = bound_owner_condition(_THREADS.c.metadata, shape, dialect)
    return select(_THREADS).where(_THREADS.c.id == bindparam("thread_id"), condition)


def search_threads(conn: Connection, query: ThreadQuery) -> list[Row[Any]]:
    """The rows of the threads matching ``query``, one page in its order (a transaction
    function: ``Transactions.read``)."""
    column = _THREAD_SORT[query.sort_by]
    key = column.desc() if query.descending else column.asc()
    statement = _filtered(select(_THREADS), query, conn.dialect.name).order_by(key, _THREADS.c.id)
    return list(conn.execute(statement.limit(query.limit).offset(query.offset)).all())


def count_threads(conn: Connection, query: ThreadQuery) -> int:
    """How many threads match ``query`` (its limit and offset aside)."""
    statement = _filtered(select(func.count()).select_from(_THREADS), query, conn.dialect.name)
    return int(conn.execute(statement).scalar_one())
