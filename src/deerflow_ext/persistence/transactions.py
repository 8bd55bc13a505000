"""Where the host store's transactions run: whole, on one thread for SQLite; on the loop otherwise.

Why: through aiosqlite every step of a transaction is a hop to aiosqlite's thread and back
(connect, execute, fetch, cursor close, commit: ~45 hops for a trivial run's host-table
work, issue 16), each a queue hand-off, a GIL switch and a ``call_soon_threadsafe`` on the
event loop's CPU, and SQLite's write lock stays taken across the hops, so concurrent runs
wait on each other's round trips. On SQLite a transaction is therefore a synchronous
function run whole, with SQLAlchemy Core on a plain ``sqlite3`` connection, on one thread
of its own (:class:`~.one_thread.OneThread`): one hand-off a transaction, the lock held only
while it runs. Elsewhere (PostgreSQL) the same function runs on the event loop through
``AsyncConnection.run_sync``: asyncpg's round trips are the network's anyway, and one
greenlet serves the whole transaction instead of one per statement.

A transaction function takes a SQLAlchemy ``Connection`` and the caller's arguments; it is
written once and runs either way.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from .engine import SQLITE_TIMEOUT_SECONDS, apply_sqlite_pragmas, is_sqlite
from .one_thread import OneThread

__all__ = ["LoopTransactions", "ThreadTransactions", "Transactions", "transactions_for"]

T = TypeVar("T")


class Transactions(Protocol):
    """Runs a transaction function (``fn(connection, *args)``) and returns its result."""

    async def write(self, fn: Callable[..., T], /, *args: Any) -> T:
        """``fn`` inside a transaction, committed when it returns, rolled back when it raises."""
        ...

    async def read(self, fn: Callable[..., T], /, *args: Any) -> T:
        """``fn`` on a connection (its reads see one snapshot on SQLite; nothing is written)."""
        ...

    async def aclose(self) -> None: ...


class LoopTransactions:
    """Transactions on the engine's own async connections, run on the event loop."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def write(self, fn: Callable[..., T], /, *args: Any) -> T:
        async with self._engine.begin() as conn:
            return await conn.run_sync(fn, *args)

    async def read(self, fn: Callable[..., T], /, *args: Any) -> T:
        async with self._engine.connect() as conn:
            return await conn.run_sync(fn, *args)

    async def aclose(self) -> None:
        return None  # the engine is its owner's to dispose


class ThreadTransactions:
    """Transactions on a synchronous engine, each run whole on one thread."""

    def __init__(self, engine: Engine, name: str = "deerflow-host-sqlite") -> None:
        self._engine = engine
        self._thread = OneThread(name)
        # A store dropped without aclose() (a test, a script) still ends its thread.
        self._finalizer = weakref.finalize(self, _shut, self._thread, engine)

    async def write(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await self._thread.run(_in_transaction, self._engine, fn, args)

    async def read(self, fn: Callable[..., T], /, *args: Any) -> T:
        return await self._thread.run(_on_connection, self._engine, fn, args)

    async def aclose(self) -> None:
        await self._thread.run(self._engine.dispose)
        self._finalizer.detach()
        self._thread.close()


def _in_transaction(engine: Engine, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    with engine.begin() as conn:
        return fn(conn, *args)


def _on_connection(engine: Engine, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    with engine.connect() as conn:
        return fn(conn, *args)


def _shut(thread: OneThread, engine: Engine) -> None:
    # Possibly inside the garbage collector on the event loop: hand the connection's close
    # to the thread and do not wait for it.
    thread.close(last=engine.dispose, wait=False)


def transactions_for(engine: AsyncEngine) -> Transactions:
    """SQLite: a synchronous twin of ``engine`` (same file, same pragmas, pysqlite) on its
    own thread; any other database: ``engine`` itself, on the loop."""
    url = engine.url
    if not is_sqlite(url):
        return LoopTransactions(engine)
    sync = create_sync_engine(
        url.set(drivername="sqlite+pysqlite"),
        # One thread uses it, but the pool may open the connection on another (dispose).
        connect_args={"timeout": SQLITE_TIMEOUT_SECONDS, "check_same_thread": False},
        pool_size=1,
        max_overflow=0,
    )
    event.listen(sync, "connect", apply_sqlite_pragmas)  # the connection the engine's would be
    return ThreadTransactions(sync)
