"""The PostgreSQL checkpointer's writes, sent by asyncpg from the event loop, in batches.

Why (issue 16): with the store's statements on the loop (``loop_statements``), what kept
the Gateway's PostgreSQL process bound by its GIL was the checkpointer's thread: 3.6 ms of
CPU a run, nearly all of it psycopg's pipeline in Python, taking the GIL from the loop
between its round trips. LangGraph still makes every row: its ``put`` and ``put_writes``
run on the loop with a recorder for a cursor (``adapters.langgraph_postgres_private``),
and this module sends the statements they recorded, over one asyncpg connection.

Writes that arrive while a batch is in flight wait for the next one. A batch sends each
statement LangGraph used, in the order they first appear, with all its rows in one
``executemany`` (asyncpg sends the rows together; each call is atomic): as many round trips
as there are kinds of statement (at most four), however many writes. A checkpoint's blobs
come before the checkpoint in its ``put``, so they are in before any reader can see it.

A batch PostgreSQL refuses is sent again write by write, so only the write at fault fails:
every statement is an upsert, and one sent twice leaves what it leaves sent once. For the
same reason a batch whose connection was lost (a restart, ``pg_terminate_backend``, noticed
only when used) is sent once more on a new connection; lost again, it fails.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

import asyncpg
from asyncpg.exceptions import OperatorInterventionError, PostgresConnectionError

from ..adapters.langgraph_postgres_private import Statement
from .asyncpg_form import asyncpg_form, numbered
from .loop_statements import LoopStatements
from .one_thread import BATCH_LIMIT

__all__ = ["PgLoopWrites"]


async def _send(statements: Sequence[Statement], connection: asyncpg.Connection) -> None:
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for statement in statements:
        grouped.setdefault(statement.query, []).extend(statement.rows)
    for query, rows in grouped.items():
        await connection.executemany(*await asyncpg_form(connection, query, rows))


def _lost(exc: Exception) -> bool:
    """Whether ``exc`` says the connection was lost (or the server is going away), not that
    PostgreSQL or asyncpg refused a statement's values."""
    if isinstance(exc, asyncpg.PostgresError):
        return isinstance(exc, PostgresConnectionError | OperatorInterventionError)
    return not isinstance(exc, ValueError | TypeError)  # asyncpg's own DataError is a ValueError


class PgLoopWrites:
    """Sends recorded writes from one event loop, batched (see the module docstring).

    Bound to the loop of its first write: :meth:`serves` says whether a caller's loop is it
    (a write from any other loop goes the thread's way, ``pg_saver``).
    """

    def __init__(self, connection: LoopStatements) -> None:
        self._connection = connection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: list[tuple[Sequence[Statement], asyncio.Future[None]]] = []
        self._sender: asyncio.Task[None] | None = None

    @classmethod
    def to(cls, conninfo: str) -> PgLoopWrites:
        """Writes to the database of a libpq URL, on one connection opened at the first."""
        return cls(LoopStatements({"dsn": conninfo}, connections=1, name="the checkpointer's"))

    def serves(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self._loop is None or self._loop is loop

    @staticmethod
    def takes(statements: Sequence[Statement]) -> bool:
        """Whether every one of ``statements`` can go this way (its placeholders are ``%s``);
        the caller sends any other through psycopg."""
        try:
            for statement in statements:
                numbered(statement.query)
        except ValueError:
            return False
        return True

    async def send(self, statements: Sequence[Statement]) -> None:
        """``statements`` (one write's) sent with those waiting beside them. A caller that
        stops waiting does not stop its write."""
        loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append((statements, future))
        if self._sender is None:
            self._sender = loop.create_task(self._drain(), name="deerflow-checkpointer-writes")
        await future

    async def idle(self) -> None:
        """Wait until every write handed over has been sent."""
        while self._sender is not None:
            await asyncio.shield(self._sender)

    async def _drain(self) -> None:
        batch: list[tuple[Sequence[Statement], asyncio.Future[None]]] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:BATCH_LIMIT], self._waiting[BATCH_LIMIT:]
                errors = await self._send_batch([statements for statements, _ in batch])
                for (_, future), error in zip(batch, errors, strict=True):
                    if future.done():  # its caller stopped waiting
                        continue
                    if error is None:
                        future.set_result(None)
                    else:
                        future.set_exception(error)
                batch = []
        finally:
            self._sender = None
            stopped = RuntimeError("the checkpointer's writes stopped before these were sent")
            for _, future in (*batch, *self._waiting):
                if not future.done():
                    future.set_exception(stopped)
            self._waiting = []

    async def _send_batch(self, batch: list[Sequence[Statement]]) -> list[BaseException | None]:
        everything = functools.partial(_send, [statement for statements in batch for statement in statements])
        try:
            try:
                await self._connection.using(everything)
            except Exception as exc:
                if not _lost(exc):
                    raise
                await self._connection.using(everything)  # once more, on a new connection
            return [None] * len(batch)
        except Exception as exc:
            if _lost(exc):  # the connection, not a statement: all of them
                return [exc] * len(batch)
            if len(batch) == 1:
                return [exc]
        errors: list[BaseException | None] = []  # a statement refused: find whose
        for statements in batch:
            try:
                await self._connection.using(functools.partial(_send, statements))
                errors.append(None)
            except Exception as exc:
                errors.append(exc)
        return errors

    async def aclose(self) -> None:
        """Send what was handed over, then close the connection."""
        await self.idle()
        await self._connection.aclose()
