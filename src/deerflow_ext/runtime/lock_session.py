"""One PostgreSQL session on which a process holds the advisory locks of many threads.

Why: a session-level advisory lock lives on the session that took it, so the coordinator
used to check a connection out of its pool for every hold and keep it for the whole run.
With 32 runs in flight that is 32 sessions, and as the count moves the pool's overflow
opens and closes them: 0.26 new PostgreSQL sessions a run (a backend started, asyncpg's
set-up, ~3 ms of the Gateway's CPU each) plus the lock's own round trips (issue 16). A
session may hold any number of advisory locks, so the locks of free threads — the common
case — are taken on this one session instead. A thread another process holds is still
waited for on a connection of its own (``pg_advisory_lock`` blocks its session).

Statements take turns on the connection (asyncpg runs one at a time), each shielded from
the caller's cancellation: a lock granted while its caller was being cancelled is then known
to the caller, who gives it back, rather than lost on a live session. When the connection
dies every lock on it is gone; the holds' heartbeats notice and fence their runs, as they do
for a connection of their own. A session dropped on purpose (a lock could not be given
back) fences its holders at once: their locks go with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..persistence.loop_statements import compile_statement

__all__ = ["LockSession", "LockSessionLostError"]

T = TypeVar("T")


class LockSessionLostError(ConnectionError):
    """The session is gone, and with it every lock it held."""


class LockSession:
    """One autocommit connection shared by many holds; see the module docstring."""

    def __init__(self, conn: AsyncConnection, driver: Any) -> None:
        self._conn = conn
        self._driver = driver
        self._turn = asyncio.Lock()
        self._holders: set[asyncio.Task[Any]] = set()
        self._dropped = False

    @classmethod
    async def open(cls, engine: AsyncEngine) -> LockSession:
        conn = await (await engine.connect()).execution_options(isolation_level="AUTOCOMMIT")
        raw = await conn.get_raw_connection()
        return cls(conn, raw.driver_connection)

    @property
    def alive(self) -> bool:
        """Whether its locks still hold, as far as this process can tell without a round trip."""
        return not (self._dropped or self._conn.invalidated or self._driver.is_closed())

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        """Run one statement in turn; it completes even if the caller is cancelled meanwhile.
        Its SQLAlchemy result: for the rare statements (a take-over, a heartbeat)."""
        return await asyncio.shield(self._queued(self._conn.execute, statement, parameters))

    async def send(self, statement: Any, parameters: Mapping[str, Any]) -> list[Any]:
        """As :meth:`execute`, for a hold's own statements (a take, a give-back): sent by
        asyncpg itself (``loop_statements``' compiled form), rows as asyncpg's records.
        SQLAlchemy's async layer around each was most of their cost to the event loop: 4%
        of its busy time at 32 clients (issue 16)."""
        return await asyncio.shield(self.start(statement, parameters))

    def start(self, statement: Any, parameters: Mapping[str, Any]) -> asyncio.Task[list[Any]]:
        """:meth:`send`'s statement, queued for its turn: a task that outlives its caller's
        cancellation, for a caller that must know what it did (a lock it took) even then."""
        compiled = compile_statement(statement, frozenset(parameters))
        task = asyncio.ensure_future(self._queued(self._driver.fetch, compiled.sql, *compiled.values(parameters)))
        task.add_done_callback(_retrieved)
        return task

    async def _queued(self, send: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``send(*args)`` in its turn, on a live session."""
        async with self._turn:
            if not self.alive:
                raise LockSessionLostError("the session holding this process's thread locks is gone")
            return await send(*args)

    def holding(self, task: asyncio.Task[Any] | None) -> None:
        """``task`` holds a thread on this session: fenced if the session is dropped."""
        if task is not None:
            self._holders.add(task)

    def released(self, task: asyncio.Task[Any] | None) -> None:
        self._holders.discard(task)

    async def drop(self) -> None:
        """End the session (its locks with it) and cancel every task that held one of them."""
        self._dropped = True
        holders, self._holders = self._holders, set()
        for task in holders:
            if task is not asyncio.current_task() and not task.done():
                task.cancel()
        await self.aclose()

    async def aclose(self) -> None:
        """Hand the connection back: to the pool when alive, discarded otherwise (a dead or
        dropped session's connection must not be reused, nor left to the garbage collector)."""
        if not self.alive:
            with contextlib.suppress(Exception):
                await self._conn.invalidate()
        with contextlib.suppress(Exception):
            await self._conn.close()


def _retrieved(task: asyncio.Task[Any]) -> None:
    # Read by whoever awaited it; when that caller was cancelled first, nobody else will.
    if not task.cancelled():
        task.exception()
