"""One PostgreSQL session on which a process holds the advisory locks of many threads.

Why: a session-level advisory lock lives on the session that took it, so the coordinator
used to check a connection out of its pool for every hold and keep it for the whole run.
With 32 runs in flight that is 32 sessions, and as the count moves the pool's overflow
opens and closes them: 0.26 new PostgreSQL sessions a run (a backend started, asyncpg's
set-up, ~3 ms of the Gateway's CPU each) plus the lock's own round trips. A
session may hold any number of advisory locks, so the locks of free threads — the common
case — are taken on this one session instead. A thread another process holds is still
waited for on a connection of its own (``pg_advisory_lock`` blocks its session).

Statements take turns on the connection (asyncpg runs one at a time), sent one after
another by one task as soon as the one before has answered, rather than each by its caller
in turn behind a lock: then each hand-over was one more wake-up of a busy event loop with
the connection idle, and at 8 clients a run waited 9 ms to take its thread.
Each statement runs whatever happens to its caller. A caller awaits the statement's future
itself, not a shield around it: every future between the answer and the caller is one more
turn of a busy loop (a shield was two, 4-5 ms a hold at 8 clients). A caller cancelled
meanwhile therefore cancels only its wait: the statement still runs, a lock it took is given
back by a give-back the caller queues behind it, and an ``abandoned`` callback learns how a
statement nobody awaits any more ended.

When the connection dies every lock on it is gone; the holds' lease refreshes notice and
fence their runs, as they do for a connection of their own. A session dropped on purpose
(a lock could not be given back) fences its holders at once: their locks go with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..persistence.loop_statements import compile_statement

__all__ = ["Abandoned", "LockSession", "LockSessionLostError"]


class LockSessionLostError(ConnectionError):
    """The session is gone, and with it every lock it held."""


class LockSession:
    """One autocommit connection shared by many holds; see the module docstring."""

    def __init__(self, conn: AsyncConnection, driver: Any) -> None:
        self._conn = conn
        self._driver = driver
        self._queue: deque[_Queued] = deque()
        self._sender: asyncio.Task[None] | None = None
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
        of its busy time at 32 clients. A caller cancelled meanwhile stops
        waiting; the statement still runs."""
        return await self.start(statement, parameters)

    def start(
        self, statement: Any, parameters: Mapping[str, Any], *, abandoned: Abandoned | None = None
    ) -> asyncio.Future[list[Any]]:
        """:meth:`send`'s statement, queued for its turn: its future, to await directly.
        Cancelling the future (its caller was cancelled) does not stop the statement; if it
        was cancelled, ``abandoned`` is called with the statement's error (``None``: it ran)
        once it has ended, for a caller that must not lose a failure even then."""
        compiled = compile_statement(statement, frozenset(parameters))
        return self._queued(self._driver.fetch, compiled.sql, *compiled.values(parameters), abandoned=abandoned)

    def _queued(
        self, send: Callable[..., Awaitable[Any]], *args: Any, abandoned: Abandoned | None = None
    ) -> asyncio.Future[Any]:
        """``send(*args)`` in its turn, on a live session: its result's future."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        future.add_done_callback(_retrieved)
        self._queue.append((send, args, future, abandoned))
        if self._sender is None:
            self._sender = loop.create_task(self._drain(), name="deerflow-lock-session")
        return future

    async def _drain(self) -> None:
        """Send the queued statements in turn, each as soon as the one before has answered."""
        queued: _Queued | None = None
        try:
            while self._queue:
                queued = self._queue.popleft()
                send, args = queued[0], queued[1]
                if not self.alive:
                    result: Any = None
                    error: BaseException | None = LockSessionLostError(
                        "the session holding this process's thread locks is gone"
                    )
                else:
                    try:
                        result, error = await send(*args), None
                    except Exception as exc:
                        result, error = None, exc
                _settle(queued, result, error)
                queued = None
        finally:
            self._sender = None
            stopped = LockSessionLostError("the lock session's sender stopped; this statement may not have run")
            leftover = list(self._queue)
            if queued is not None:  # this task was cancelled while it was being sent
                leftover.append(queued)
            self._queue.clear()
            for waiting in leftover:
                _settle(waiting, None, stopped)

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


Abandoned = Callable[[BaseException | None], None]
"""Told how a statement ended whose caller stopped waiting: its error, or ``None``."""

_Queued = tuple[Callable[..., Awaitable[Any]], tuple[Any, ...], asyncio.Future[Any], Abandoned | None]
"""A statement waiting for its turn: how to send it, its arguments, its future, and who to
tell how it ended if its caller stopped waiting."""


def _settle(queued: _Queued, result: Any, error: BaseException | None) -> None:
    _send, _args, future, abandoned = queued
    if future.cancelled():  # its caller stopped waiting
        if abandoned is not None:
            abandoned(error)
    elif error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _retrieved(future: asyncio.Future[Any]) -> None:
    # Read by whoever awaited it; when that caller was cancelled first, nobody else will.
    if not future.cancelled():
        future.exception()
