"""The store's hot-path statements on SQLite, compiled once and sent on the transaction's
own pysqlite connection.

Why (docs/ARCHITECTURE.md, "How a run's rows are written"): a trivial run writes its
thread and run rows in four transactions of one or two statements each, run on the event
loop (``one_thread``'s loop-first thread) when nothing else is queued. Through
``Connection.execute`` each statement cost the loop ~50-60 us of SQLAlchemy's execution
layer in a busy server, against a few for pysqlite itself. So the statement is compiled
once (``compiled``) with SQLAlchemy's SQLite dialect and the values pass its bind
processors (a datetime and JSON in the very text SQLAlchemy writes and reads back); then it
goes to the DBAPI connection under the caller's SQLAlchemy transaction, which still begins,
commits and rolls back, so a transaction function may mix these with ``conn.execute``. A
driver error is raised as SQLAlchemy would raise it (``DBAPIError`` around sqlite3's), so
callers and ``is_sqlite_busy`` see what they saw.

On another database (``records.thread_writes.merge_metadata`` runs on either) a statement
goes through ``conn.execute`` as before.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.dialects.sqlite.pysqlite import dialect as pysqlite_dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Select
from sqlalchemy.sql.expression import UpdateBase

from .compiled import compile_for

__all__ = ["execute", "first"]

_DIALECT = pysqlite_dialect()


def execute(conn: Connection, statement: UpdateBase, params: Mapping[str, Any]) -> int:
    """``statement`` inside ``conn``'s transaction; how many rows it changed."""
    if conn.dialect.name != "sqlite":
        return int(conn.execute(statement, params).rowcount)
    cursor = _sent(conn, statement, params)
    try:
        return int(cursor.rowcount)
    finally:
        cursor.close()


def first(conn: Connection, statement: Select[Any], params: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The first row ``statement`` selects inside ``conn``'s transaction, each column as
    SQLAlchemy would read it (JSON parsed), or ``None``."""
    if conn.dialect.name != "sqlite":
        found = conn.execute(statement, params).first()
        return None if found is None else tuple(found)
    cursor = _sent(conn, statement, params)
    try:
        # Closed at once: a SELECT left unfinished would keep its read snapshot open.
        row = cursor.fetchone()
    finally:
        cursor.close()
    if row is None:
        return None
    return tuple(value if read is None else read(value) for value, read in zip(row, _readers(statement), strict=True))


def _sent(conn: Connection, statement: UpdateBase | Select[Any], params: Mapping[str, Any]) -> sqlite3.Cursor:
    compiled = compile_for(_DIALECT, statement, frozenset(params), processed=True)
    values = compiled.values(params)
    try:
        return cast(sqlite3.Connection, conn.connection.dbapi_connection).execute(compiled.sql, values)
    except sqlite3.Error as exc:
        raise DBAPIError.instance(compiled.sql, values, exc, sqlite3.Error) from exc


@functools.cache
def _readers(statement: Select[Any]) -> tuple[Any, ...]:
    """Per selected column, the dialect's result processor, or ``None``."""
    return tuple(
        column.type.dialect_impl(_DIALECT).result_processor(_DIALECT, None) for column in statement.selected_columns
    )
