"""Engine and session factory from a database URL.

SQLite is the zero-setup default, so the engine creates the database folder itself and
turns on what a multi-task async server needs from SQLite (WAL, a busy timeout, foreign
keys). PostgreSQL URLs are accepted in their common spellings and normalised to asyncpg;
pooled connections the server closed (a restart) are replaced at checkout.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

from .durability import Durability, engine_options, postgres_server_settings, sqlite_synchronous

__all__ = [
    "DEFAULT_DATABASE_URL",
    "SQLITE_SYNCHRONOUS",
    "SQLITE_TIMEOUT_SECONDS",
    "SessionFactory",
    "apply_sqlite_pragmas",
    "create_engine",
    "is_sqlite",
    "is_sqlite_busy",
    "make_session_factory",
    "normalize_database_url",
    "sqlite_path",
    "sqlite_pragmas",
    "wait_for_no_lock",
]

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./.deer-flow/deerflow.db"
#: How long a SQLite connection waits for another writer's lock (every engine on the file).
SQLITE_TIMEOUT_SECONDS = 30

SessionFactory = async_sessionmaker[AsyncSession]

# Under WAL, NORMAL syncs the log at checkpoints instead of on every commit: a committed
# transaction survives the process crashing (it is in the log, which the OS holds); only a
# power cut or kernel crash can lose the last commits, never corrupt the database. FULL
# (SQLite's default) paid an fsync per commit, and a run commits about ten times across
# the host tables and the checkpointer: SQLite was measured as the Gateway's
# bottleneck. The checkpointer's own connection gets the same setting. The level when no
# durability is chosen (``durability``: ``full`` is FULL, ``relaxed`` NORMAL).
SQLITE_SYNCHRONOUS = "NORMAL"


def normalize_database_url(url: str | URL) -> URL:
    """``sqlite://`` -> aiosqlite, ``postgres(ql)://`` / psycopg -> asyncpg."""
    parsed = make_url(str(url)) if not isinstance(url, URL) else url
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+asyncpg")
    raise ValueError(
        f"unsupported database URL {parsed.render_as_string(hide_password=True)!r}: "
        "use sqlite+aiosqlite:///path or postgresql+asyncpg://..."
    )


def is_sqlite(url: str | URL) -> bool:
    return normalize_database_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str | URL) -> Path | None:
    """The database file of a SQLite URL; ``None`` for in-memory databases."""
    parsed = normalize_database_url(url)
    if parsed.get_backend_name() != "sqlite":
        raise ValueError("not a SQLite URL")
    if not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def create_engine(url: str | URL, *, durability: Durability | None = None, **kwargs: Any) -> AsyncEngine:
    """An ``AsyncEngine`` for ``url``; creates the SQLite folder when needed.

    ``durability`` (``durability``: ``full``, ``relaxed``, or ``None`` for each database's
    default) is applied to every connection the engine opens and carried by the engine for
    what is derived from it."""
    parsed = normalize_database_url(url)
    if durability is not None:
        kwargs["execution_options"] = {**kwargs.get("execution_options", {}), **engine_options(durability)}
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_path(parsed)
        if path is None:
            raise ValueError("an in-memory SQLite database cannot be shared with the checkpointer; use a file")
        path.parent.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("connect_args", {"timeout": SQLITE_TIMEOUT_SECONDS})
        # The pool's rollback-on-return, done only when the connection is in a transaction
        # (SQLAlchemy's documented custom reset scheme: reset_on_return=None plus a "reset"
        # listener). After a commit there is none, and the unconditional rollback was one
        # more hop to aiosqlite's thread per transaction.
        kwargs.setdefault("pool_reset_on_return", None)
        engine = create_async_engine(parsed, **kwargs)
        event.listen(engine.sync_engine, "connect", sqlite_pragmas(durability))
        if kwargs["pool_reset_on_return"] is None:
            event.listen(engine.sync_engine, "reset", _sqlite_reset)
        return engine
    settings = postgres_server_settings(durability)
    if settings:  # sent in the startup packet: no round trip
        connect_args = dict(kwargs.get("connect_args", {}))
        connect_args["server_settings"] = {**connect_args.get("server_settings", {}), **settings}
        kwargs["connect_args"] = connect_args
    engine = create_async_engine(parsed, **kwargs)
    event.listen(engine.sync_engine, "checkout", _discard_closed)
    return engine


def _discard_closed(_dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
    """A pooled connection the server closed is replaced at checkout, without a round trip.

    ``pool_pre_ping`` asked the server on every checkout (six round trips a run, ~12% of
    the Gateway's loop on PostgreSQL). A PostgreSQL restart, or an
    administrator terminating the sessions, closes every pooled connection's socket, and
    asyncpg marks the connection closed as soon as the loop reads that: ``is_closed()``
    knows without asking. Raising ``DisconnectionError`` here is SQLAlchemy's documented
    way to have the pool discard the connection and check out a fresh one. A connection
    that dies while in use fails its statement, as it did with the ping; SQLAlchemy then
    invalidates the rest of the pool.
    """
    connection = record.driver_connection
    if connection is not None and connection.is_closed():
        raise DisconnectionError("the database closed this pooled connection")


def apply_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """The ``connect`` listener of a SQLite engine of the host with no durability set:
    :func:`sqlite_pragmas` at :data:`SQLITE_SYNCHRONOUS`."""
    _pragmas(dbapi_connection, SQLITE_SYNCHRONOUS)


def sqlite_pragmas(durability: Durability | None) -> Callable[[Any, Any], None]:
    """The ``connect`` listener of every SQLite engine of the host (WAL, sync level, keys,
    busy timeout) at ``durability``'s sync level: the async engine's and its synchronous
    twin's (``transactions``)."""
    synchronous = sqlite_synchronous(durability) or SQLITE_SYNCHRONOUS
    return lambda dbapi_connection, _record: _pragmas(dbapi_connection, synchronous)


def _pragmas(dbapi_connection: Any, synchronous: str) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
    finally:
        cursor.close()


def wait_for_no_lock(dbapi_connection: Any, _record: Any = None) -> None:
    """After :func:`apply_sqlite_pragmas`, on a connection whose calls are made on the event
    loop (``one_thread``'s loop-first threads): meeting another connection's lock fails at
    once (:func:`is_sqlite_busy`) instead of blocking the loop, and the thread waits instead."""
    dbapi_connection.execute("PRAGMA busy_timeout=0")


def is_sqlite_busy(exc: BaseException) -> bool:
    """Whether ``exc`` (sqlite3's, or SQLAlchemy's around it) is SQLite's "database is locked"
    (``SQLITE_BUSY`` and its extended codes): another connection holds the lock, and the
    same call made again later can succeed."""
    error = getattr(exc, "orig", exc)
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.OperationalError) and code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


def _sqlite_reset(dbapi_connection: Any, record: ConnectionPoolEntry, state: PoolResetState) -> None:
    # What the default reset does (it skips a connection returned outside the event loop,
    # which cannot await), minus the rollback of a connection with nothing to roll back.
    if state.asyncio_safe and _in_transaction(record):
        dbapi_connection.rollback()


def _in_transaction(record: ConnectionPoolEntry) -> bool:
    connection = record.driver_connection
    if connection is None:  # invalidated: nothing to roll back
        return False
    try:
        return bool(connection.in_transaction)
    except Exception:  # a closed or broken connection: roll back as the default would
        return True


def make_session_factory(engine: AsyncEngine) -> SessionFactory:
    # expire_on_commit=False: rows are read after commit to build responses.
    return async_sessionmaker(engine, expire_on_commit=False)
