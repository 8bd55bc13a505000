"""Where the host store's transactions run: whole, as one synchronous function written once
with SQLAlchemy Core, on the dialect's one driver.

A transaction function takes a SQLAlchemy ``Connection`` and the caller's arguments; it is
written once and runs on either database.

- SQLite: pysqlite, one connection, the same pragmas, kept checked out between transactions
  (``_Held``), on a thread of its own that is loop-first (``one_thread``): a transaction runs
  right on the event loop when nothing is queued for the thread, and goes to the thread when
  something is, or when another connection holds the lock (this connection waits for none).
  Why not the async engine: through aiosqlite each step (connect, execute, fetch, cursor
  close, commit: ~45 a trivial run's host-table work) is a hop to aiosqlite's thread and
  back, and SQLite's write lock stays taken across the hops, so concurrent runs wait on each
  other's round trips. Here a transaction is one hand-off at most.
- PostgreSQL: the host's own engine (asyncpg), the function run through SQLAlchemy's
  ``run_sync`` on one of its pooled connections. A transaction that waits (a row lock) waits
  on the loop without holding anything else up. What every run writes and reads does not
  come here: each is one statement, which asyncpg sends straight from the loop
  (``loop_statements``), without SQLAlchemy's per-statement greenlet switch. What does come
  here is now and then: cancel records, searches, metadata merges, deletes, recovery.
  PostgreSQL therefore speaks one driver for the host's rows; psycopg is left to LangGraph's
  checkpointer, which is written for it (``pg_saver``).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from .durability import durability_of
from .engine import SQLITE_TIMEOUT_SECONDS, is_sqlite, is_sqlite_busy, sqlite_pragmas, wait_for_no_lock
from .one_thread import Busy, OneThread
from .wal_checkpoints import checkpoint_rarely

__all__ = ["EngineTransactions", "ThreadTransactions", "Transactions", "transactions_for"]

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

    async def read_aside(self, fn: Callable[..., T], /, *args: Any) -> T:
        """:meth:`read`, for a read whose size a client sets (a store search, a thread search):
        on SQLite always on the connection's thread, never on the event loop, so the loop
        serves other requests while it runs; on PostgreSQL a read as any other (the database
        does the work; the rows come back in awaited round trips)."""
        ...

    async def write_aside(self, fn: Callable[..., T], /, *args: Any) -> T:
        """:meth:`write`, for background work whose size the data sets (an expiry sweep's
        batch): on SQLite always on the connection's thread, never on the event loop; on
        PostgreSQL a write as any other."""
        ...

    async def aclose(self) -> None: ...


class ThreadTransactions:
    """Transactions on a synchronous one-connection engine (SQLite's twin), each run whole on
    its loop-first thread."""

    def __init__(self, engine: Engine, name: str = "deerflow-host-sqlite", *, loop_first: Busy | None = None) -> None:
        self._engine = engine
        # One thread runs one transaction at a time: its connection can stay checked out.
        self._held = _Held(engine)
        self._thread = OneThread(name, loop_first=loop_first, patience=SQLITE_TIMEOUT_SECONDS)
        # A store dropped without aclose() (a test, a script) still ends its thread.
        self._finalizer = weakref.finalize(self, _shut, self._thread, self._held, engine)

    @property
    def engine(self) -> Engine:
        """The synchronous twin the transactions run on."""
        return self._engine

    async def write(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await self._thread.run(self._held.write, fn, args)

    async def read(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await self._thread.run(self._held.read, fn, args)

    async def read_aside(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await self._thread.run_aside(self._held.read, fn, args)

    async def write_aside(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await self._thread.run_aside(self._held.write, fn, args)

    async def aclose(self) -> None:
        await self._thread.run(_shut_down, self._held, self._engine)
        self._finalizer.detach()
        self._thread.close()


class EngineTransactions:
    """Transactions on the host's async engine (PostgreSQL's asyncpg), each function run
    whole through ``run_sync`` on one pooled connection; reads in autocommit (READ
    COMMITTED takes a snapshot per statement either way), so a read sends no BEGIN."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    @property
    def engine(self) -> AsyncEngine:
        """The engine the transactions run on (its owner's)."""
        return self._engine

    async def write(self, fn: Callable[..., T], /, *args: Any) -> T:
        async with self._engine.begin() as conn:
            return await conn.run_sync(fn, *args)

    async def read(self, fn: Callable[..., T], /, *args: Any) -> T:
        async with self._engine.connect() as conn:
            autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
            return await autocommit.run_sync(fn, *args)

    async def read_aside(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await self.read(fn, *args)

    async def write_aside(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await self.write(fn, *args)

    async def aclose(self) -> None:
        """Nothing of its own to close: the engine is its owner's."""


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


def _shut_down(held: _Held | None, engine: Engine) -> None:
    if held is not None:
        held.close()
    engine.dispose()


def _shut(thread: OneThread, held: _Held | None, engine: Engine) -> None:
    # Possibly inside the garbage collector on the event loop: hand the connection's close
    # to the thread and do not wait for it.
    thread.close(last=functools.partial(_shut_down, held, engine), wait=False)


def transactions_for(engine: AsyncEngine) -> Transactions:
    """The host store's transactions on ``engine``'s database: SQLite's on a synchronous twin
    (same file, same pragmas and durability, pysqlite) on one loop-first thread; PostgreSQL's
    on ``engine`` itself."""
    url = engine.url
    if not is_sqlite(url):
        return EngineTransactions(engine)
    sync = create_sync_engine(
        url.set(drivername="sqlite+pysqlite"),
        # One thread uses it, but the pool may open the connection on another (dispose).
        connect_args={"timeout": SQLITE_TIMEOUT_SECONDS, "check_same_thread": False},
        pool_size=1,
        max_overflow=0,
    )
    event.listen(sync, "connect", sqlite_pragmas(durability_of(engine)))  # the connection the engine's would be
    event.listen(sync, "connect", wait_for_no_lock)  # after them: its transactions run on the loop
    event.listen(sync, "connect", checkpoint_rarely)  # and so do its commits
    return ThreadTransactions(sync, loop_first=is_sqlite_busy)
