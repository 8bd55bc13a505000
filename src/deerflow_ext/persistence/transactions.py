"""Where the host store's transactions run: whole, on threads of their own, with a
synchronous driver.

Why: through an async driver every step of a transaction is a wake-up of the event loop.
Through aiosqlite each step (connect, execute, fetch, cursor close, commit: ~45 a trivial
run's host-table work) is a hop to aiosqlite's thread and back, and SQLite's
write lock stays taken across the hops, so concurrent runs wait on each other's round
trips. Through asyncpg under SQLAlchemy each statement is a greenlet switch, a send, an
epoll wake-up and a receive on the loop: a fifth of the loop's CPU per run on PostgreSQL,
the one core every run of the process shares. So a transaction is a
synchronous function run whole with SQLAlchemy Core on a *twin* of the engine (same
database, synchronous driver) on a thread of its own (:class:`~.one_thread.OneThread`):
one hand-off a transaction.

- SQLite: pysqlite, one connection, the same pragmas, kept checked out between
  transactions (``_Held``); the write lock is held only while a transaction runs. Its
  thread is loop-first (``one_thread``): a transaction runs right on the event loop when
  nothing is queued for the thread, and goes to the thread when something is, or when
  another connection holds the lock (this connection waits for none).
- PostgreSQL: psycopg, :data:`POSTGRES_THREADS` threads taking transactions from one queue,
  each on a connection of the twin's pool, so a transaction that waits for a row lock holds
  up only its own thread. A pooled connection the server closed is replaced at checkout
  without a round trip (``liveness``), as the checkpointer's are. What every run writes
  and reads is not among them: there each is one statement, which asyncpg sends straight
  from the loop (``loop_statements``) for less than a hand-off costs.

The async engine stays the owner's for everything else (migrations, sweeps, deletes).

A transaction function takes a SQLAlchemy ``Connection`` and the caller's arguments; it is
written once and runs on either database.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import ConnectionPoolEntry

from .durability import durability_of, libpq_options
from .engine import SQLITE_TIMEOUT_SECONDS, is_sqlite, is_sqlite_busy, sqlite_pragmas, wait_for_no_lock
from .liveness import closed_by_server
from .one_thread import Busy, OneThread
from .wal_checkpoints import checkpoint_rarely

__all__ = ["POSTGRES_THREADS", "ThreadTransactions", "Transactions", "transactions_for"]

POSTGRES_THREADS = 2
"""Threads (and pooled connections) of one process's PostgreSQL store transactions.

A run's own writes and reads do not come here (``loop_statements``); cancel records,
searches and metadata merges do, now and then. Two, so a transaction waiting for a row lock
(a metadata merge locks its thread's row) stalls only one of them; few, because every
Gateway process keeps these connections for its whole life."""

T = TypeVar("T")


class Transactions(Protocol):
    """Runs a transaction function (``fn(connection, *args)``) and returns its result."""

    async def write(self, fn: Callable[..., T], /, *args: Any) -> T:
        """``fn`` inside a transaction, committed when it returns, rolled back when it raises."""
        ...

    async def read(self, fn: Callable[..., T], /, *args: Any) -> T:
        """``fn`` on a connection, nothing written: its reads see one snapshot on SQLite; on
        PostgreSQL (READ COMMITTED: a snapshot per statement either way) in autocommit, so a
        read is its statements' round trips alone."""
        ...

    async def aclose(self) -> None: ...


class ThreadTransactions:
    """Transactions on a synchronous engine, each run whole on one of its threads."""

    def __init__(
        self,
        engine: Engine,
        name: str = "deerflow-host-sqlite",
        *,
        threads: int = 1,
        autocommit: bool = False,
        loop_first: Busy | None = None,
    ) -> None:
        self._engine = engine
        # One thread runs one transaction at a time: its connection can stay checked out.
        self._held = _Held(engine) if threads == 1 and not autocommit else None
        # With ``autocommit``, reads send no BEGIN/ROLLBACK.
        self._read = _in_autocommit if autocommit else _on_connection
        self._thread = OneThread(name, threads=threads, loop_first=loop_first, patience=SQLITE_TIMEOUT_SECONDS)
        # A store dropped without aclose() (a test, a script) still ends its thread.
        self._finalizer = weakref.finalize(self, _shut, self._thread, self._held, engine)

    @property
    def engine(self) -> Engine:
        """The synchronous twin the transactions run on."""
        return self._engine

    async def write(self, fn: Callable[..., T], /, *args: Any) -> T:
        if self._held is not None:
            return await self._thread.run(self._held.write, fn, args)
        return await self._thread.run(_in_transaction, self._engine, fn, args)

    async def read(self, fn: Callable[..., T], /, *args: Any) -> T:
        if self._held is not None:
            return await self._thread.run(self._held.read, fn, args)
        return await self._thread.run(self._read, self._engine, fn, args)

    async def aclose(self) -> None:
        await self._thread.run(_shut_down, self._held, self._engine)
        self._finalizer.detach()
        self._thread.close()


class _Held:
    """The one connection of a one-thread twin (SQLite's), kept checked out between
    transactions.

    Why: ``engine.begin()`` checks the connection out of the pool and back in
    (with the pool's events and its reset) around every transaction: ~18 us of the 30 an
    empty SQLite transaction costs, four times a run, on the event loop. One thread runs
    the transactions one at a time, so nothing else wants the connection meanwhile. A
    transaction that raises gives it back to the pool, so whatever state the error left
    it in is the pool's to reset, and the next one checks it out again."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None

    def write(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn = self._connection()
        try:
            with conn.begin():
                return fn(conn, *args)
        except BaseException:
            self.close()
            raise

    def read(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn = self._connection()
        try:
            found = fn(conn, *args)
            conn.rollback()  # ends what SQLAlchemy began for the read, as a check-in did
            return found
        except BaseException:
            self.close()
            raise

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = self._engine.connect()
        return self._conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _in_transaction(engine: Engine, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    with engine.begin() as conn:
        return fn(conn, *args)


def _in_autocommit(engine: Engine, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    with engine.connect() as conn:
        return fn(conn.execution_options(isolation_level="AUTOCOMMIT"), *args)


def _on_connection(engine: Engine, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    with engine.connect() as conn:
        return fn(conn, *args)


def _shut_down(held: _Held | None, engine: Engine) -> None:
    if held is not None:
        held.close()
    engine.dispose()


def _shut(thread: OneThread, held: _Held | None, engine: Engine) -> None:
    # Possibly inside the garbage collector on the event loop: hand the connection's close
    # to the thread and do not wait for it.
    thread.close(last=functools.partial(_shut_down, held, engine), wait=False)


def _discard_closed(dbapi_connection: Any, _record: ConnectionPoolEntry, _proxy: Any) -> None:
    """The PostgreSQL twin's checkout check: SQLAlchemy's documented way to have the pool
    replace a connection is raising ``DisconnectionError`` here."""
    if closed_by_server(dbapi_connection):
        raise DisconnectionError("the database closed this pooled connection")


def transactions_for(engine: AsyncEngine) -> Transactions:
    """A synchronous twin of ``engine`` on threads of its own: SQLite's (same file, same
    pragmas, pysqlite) on one, PostgreSQL's (psycopg) on :data:`POSTGRES_THREADS`; at the
    engine's durability (``durability``)."""
    url = engine.url
    durability = durability_of(engine)
    if not is_sqlite(url):
        twin = create_sync_engine(
            url.set(drivername="postgresql+psycopg"),
            connect_args=libpq_options(durability),
            pool_size=POSTGRES_THREADS,
            max_overflow=0,
        )
        event.listen(twin, "checkout", _discard_closed)
        return ThreadTransactions(twin, "deerflow-host-postgres", threads=POSTGRES_THREADS, autocommit=True)
    sync = create_sync_engine(
        url.set(drivername="sqlite+pysqlite"),
        # One thread uses it, but the pool may open the connection on another (dispose).
        connect_args={"timeout": SQLITE_TIMEOUT_SECONDS, "check_same_thread": False},
        pool_size=1,
        max_overflow=0,
    )
    event.listen(sync, "connect", sqlite_pragmas(durability))  # the connection the engine's would be
    event.listen(sync, "connect", wait_for_no_lock)  # after them: its transactions run on the loop
    event.listen(sync, "connect", checkpoint_rarely)  # and so do its commits
    return ThreadTransactions(sync, loop_first=is_sqlite_busy)
