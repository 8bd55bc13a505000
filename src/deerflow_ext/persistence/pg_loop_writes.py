"""The PostgreSQL checkpointer's writes, sent by asyncpg from the event loop, in batches.

Why: with the store's statements on the loop (``loop_statements``), what kept
the Gateway's PostgreSQL process bound by its GIL was the checkpointer's thread: 3.6 ms of
CPU a run, nearly all of it psycopg's pipeline in Python, taking the GIL from the loop
between its round trips. LangGraph still makes every row: its ``put`` and ``put_writes``
run on the loop with a recorder for a cursor (``adapters.langgraph_postgres_private``),
and this module sends the statements they recorded, over one asyncpg connection.

Writes that arrive while a batch is in flight wait for the next one. A batch is one
statement (``joined_upserts``): every kind of statement LangGraph used, each with all its
rows, in one round trip and one commit, however many writes; a checkpoint's blobs are in
when the checkpoint is. Statements that cannot be joined go one kind after another, in the
order they first appear, each kind's rows in one ``executemany`` (each call atomic, the
blobs first).

Writes made in runs' scopes (below) also wait up to :data:`GATHER_SECONDS` for others to go
with them, unless somebody waits for them first: a read in the scope, the scope's end, a
write outside any scope (:meth:`PgLoopWrites.flush`). Without that wait a batch took what
had queued while the one before was in flight, so a cheaper batch only made more of them:
at 1 client 5.4 a run instead of 3.0, and no CPU saved. With it a trivial run's
writes go in one batch, at its end.

Inside :func:`writes_behind` (a run's graph, ``agents.host``) a write is acknowledged as soon
as it is queued, not when PostgreSQL has committed it, and the scope's end waits for all of
them. LangGraph saves each checkpoint only after the one before it was acknowledged, so with
an acknowledgement per commit a run's checkpoints went out one batch after another, each
a round trip or more through a loop busy with other runs: at 8 clients a run waited 10 ms a
write and ended 30 ms after its graph had, while the loop idled. Queued, they keep their
order (one connection, batches in turn), a read in the scope waits for them first
(:func:`caught_up`), and the run is reported ended only once they are all in. A write that
fails fails the scope: its later writes are not sent (as LangGraph sends no checkpoint after
one that failed) and the scope's end raises the failure, so the run fails with it.

A batch PostgreSQL refuses is sent again write by write, so only the write at fault fails:
every statement is an upsert, and one sent twice leaves what it leaves sent once. For the
same reason a batch whose connection was lost (a restart, ``pg_terminate_backend``, noticed
only when used) is sent once more on a new connection; lost again, it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import asyncpg
from asyncpg.exceptions import OperatorInterventionError, PostgresConnectionError

from ..adapters.langgraph_postgres_private import Statement
from .asyncpg_form import asyncpg_rows, numbered, parameter_types
from .joined_upserts import joined
from .loop_statements import LoopStatements
from .one_thread import BATCH_LIMIT

__all__ = ["GATHER_SECONDS", "PgLoopWrites", "caught_up", "writes_behind"]

GATHER_SECONDS = 0.025
"""How long writes made in runs' scopes wait for others to go with them, unless somebody
waits for them first (a read in the scope, its end, a write made outside any scope): the
most a checkpoint's commit is put off. A trivial run makes its writes within ~10 ms, so at
1 client they go in one batch, at its end."""


class _Behind:
    """The writes of one :func:`writes_behind` scope not settled yet, the last one queued,
    and the scope's first failure."""

    __slots__ = ("failure", "last", "pending", "writers")

    def __init__(self) -> None:
        self.pending: set[asyncio.Future[None]] = set()
        self.last: asyncio.Future[None] | None = None
        self.failure: BaseException | None = None
        self.writers: set[PgLoopWrites] = set()

    def queued(self, future: asyncio.Future[None], writer: PgLoopWrites) -> None:
        self.pending.add(future)
        self.last = future
        self.writers.add(writer)
        future.add_done_callback(self.settle)

    def settle(self, future: asyncio.Future[None]) -> None:
        self.pending.discard(future)
        if not future.cancelled():
            failure = future.exception()  # taken, so asyncio does not report it unretrieved
            self.failure = self.failure or failure

    async def settled(self) -> None:
        """Wait for every write of the scope. One connection sends and settles writes in
        the order they were queued, so awaiting the last is awaiting them all, and doing so
        directly costs one turn of the loop where ``asyncio.wait`` costs two (at 8 clients a
        turn is 1-2 ms of a run); their ``settle`` callbacks, scheduled first, have
        run when this wakes. Writes on several connections (shards) settle in no such
        order: then whatever is still pending is waited for as a set."""
        while self.pending:
            for writer in self.writers:
                writer.flush()  # waited for now: not gathered any longer
            last = self.last
            if last is None or last.done():
                await asyncio.wait(list(self.pending))
                continue
            with contextlib.suppress(Exception):  # its failure is the scope's, taken by ``settle``
                await last


_scope: ContextVar[_Behind | None] = ContextVar("deerflow_checkpoint_writes_behind", default=None)


def _unsent(scope: _Behind | None) -> BaseException | None:
    """Why a write of ``scope`` is not sent: an earlier one of it failed (``None``: it is sent)."""
    if scope is None or scope.failure is None:
        return None
    error = RuntimeError("not sent: an earlier checkpoint write of this run failed")
    error.__cause__ = scope.failure
    return error


@asynccontextmanager
async def writes_behind() -> AsyncIterator[None]:
    """Loop writes made in here (and in the tasks started in here) are acknowledged once
    queued; leaving waits until every one of them is written and raises the first failure
    (after the body's own exception, if it raised: that one propagates)."""
    scope = _Behind()
    token = _scope.set(scope)
    try:
        yield
    except BaseException:
        _scope.reset(token)
        await scope.settled()
        raise
    _scope.reset(token)
    await scope.settled()
    if scope.failure is not None:
        raise scope.failure


async def caught_up() -> None:
    """Wait until the writes of the :func:`writes_behind` scope this runs in are written (a
    read must see them)."""
    scope = _scope.get()
    if scope is not None:
        await scope.settled()


async def _send(statements: Sequence[Statement], connection: asyncpg.Connection) -> None:
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for statement in statements:
        grouped.setdefault(statement.query, []).extend(statement.rows)
    forms = []
    for query, rows in grouped.items():
        sql = numbered(query)
        types = await parameter_types(connection, sql)
        forms.append((sql, types, asyncpg_rows(rows, types)))
    one = joined(forms)
    if one is not None:
        await connection.execute(one.sql, *one.arrays)
        return
    for sql, _types, rows in forms:
        await connection.executemany(sql, rows)


def _lost(exc: Exception) -> bool:
    """Whether ``exc`` says the connection was lost (or the server is going away), not that
    PostgreSQL or asyncpg refused a statement's values."""
    if isinstance(exc, asyncpg.PostgresError):
        return isinstance(exc, PostgresConnectionError | OperatorInterventionError)
    return not isinstance(exc, ValueError | TypeError)  # asyncpg's own DataError is a ValueError


def _wake_up(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)


_Waiting = tuple[Sequence[Statement], asyncio.Future[None], _Behind | None]
"""A write handed over: its statements, the future its sender awaits, and its scope."""


class PgLoopWrites:
    """Sends recorded writes from one event loop, batched (see the module docstring).

    Bound to the loop of its first write: :meth:`serves` says whether a caller's loop is it
    (a write from any other loop goes the thread's way, ``pg_saver``).
    """

    def __init__(self, connection: LoopStatements, *, gather: float = GATHER_SECONDS) -> None:
        self._connection = connection
        self.gather = gather
        self._waiting: list[_Waiting] = []
        self._sender: asyncio.Task[None] | None = None
        self._urgent = False  # somebody waits for the writes waiting: no gathering
        self._wake: asyncio.Future[None] | None = None  # ends the gathering early

    @classmethod
    def to(cls, conninfo: str) -> PgLoopWrites:
        """Writes to the database of a libpq URL, on one connection opened at the first."""
        return cls(LoopStatements({"dsn": conninfo}, connections=1, name="the checkpointer's"))

    def serves(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self._connection.serves(loop)

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
        """``statements`` (one write's) sent with those waiting beside them; in a
        :func:`writes_behind` scope, only queued. A caller that stops waiting does not stop
        its write."""
        scope = _scope.get()
        unsent = _unsent(scope)
        if unsent is not None:
            raise unsent
        loop = asyncio.get_running_loop()
        self._connection.bind(loop)  # now, not when the sender first uses the connection
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append((statements, future, scope))
        if self._sender is None:
            self._sender = loop.create_task(self._drain(), name="deerflow-checkpointer-writes")
        if scope is None:
            self.flush()  # its caller waits for it
            await future
            return
        scope.queued(future, self)

    def flush(self) -> None:
        """Send the writes waiting now without gathering more: somebody waits for them."""
        if self._waiting:
            self._urgent = True
            if self._wake is not None:
                _wake_up(self._wake)

    async def idle(self) -> None:
        """Wait until every write handed over has been sent."""
        while self._sender is not None:
            self.flush()
            await asyncio.shield(self._sender)

    async def _gathered(self) -> None:
        """Return once the writes waiting are :attr:`gather` seconds old, or when somebody
        waits for them (:meth:`flush`)."""
        if self._urgent or self.gather <= 0:
            return
        loop = asyncio.get_running_loop()
        self._wake = wake = loop.create_future()
        timer = loop.call_later(self.gather, _wake_up, wake)
        try:
            await wake
        finally:
            timer.cancel()
            self._wake = None

    async def _drain(self) -> None:
        batch: list[_Waiting] = []
        try:
            while self._waiting:
                await self._gathered()
                batch, self._waiting = self._waiting[:BATCH_LIMIT], self._waiting[BATCH_LIMIT:]
                self._urgent = bool(self._waiting) and self._urgent
                errors = await self._send_batch(batch)
                for (_, future, _), error in zip(batch, errors, strict=True):
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
            for _, future, _ in (*batch, *self._waiting):
                if not future.done():
                    future.set_exception(stopped)
            self._waiting = []

    async def _send_batch(self, batch: list[_Waiting]) -> list[BaseException | None]:
        errors = [_unsent(scope) for _, _, scope in batch]  # a failed scope's writes stay unsent
        sending = [index for index, error in enumerate(errors) if error is None]
        if not sending:
            return errors
        everything = functools.partial(_send, [statement for index in sending for statement in batch[index][0]])
        try:
            try:
                await self._connection.using(everything)
            except Exception as exc:
                if not _lost(exc):
                    raise
                await self._connection.using(everything)  # once more, on a new connection
            return errors
        except Exception as exc:
            if _lost(exc) or len(sending) == 1:  # the connection (all of them), or the one at fault
                for index in sending:
                    errors[index] = exc
                return errors
        for index in sending:  # a statement refused: find whose
            statements, _, scope = batch[index]
            errors[index] = _unsent(scope)
            if errors[index] is not None:
                continue
            try:
                await self._connection.using(functools.partial(_send, statements))
            except Exception as exc:
                errors[index] = exc
                if scope is not None and scope.failure is None:
                    scope.failure = exc  # its writes later in this batch are not sent
        return errors

    async def aclose(self) -> None:
        """Send what was handed over, then close the connection."""
        await self.idle()
        await self._connection.aclose()
