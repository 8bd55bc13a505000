"""PostgreSQL statements sent by asyncpg straight from the event loop, each compiled once.

Why (docs/ARCHITECTURE.md, "How a run's rows are written"): on PostgreSQL the Gateway's
process is bound by its one GIL, not by its event loop. The writes every run makes (its
thread, its row, its start, its end: four statements) ran on the store's threads through
SQLAlchemy and psycopg, and cost those threads 0.5-0.9 ms each in the server against ~0.19
ms alone: the thread woke for the statement, waited for the GIL the loop held, and woke the
loop again with the answer. Made through SQLAlchemy's async engine on the loop instead they
cost more (its greenlet and result layers: 0.9-0.96x the runs a second). asyncpg alone, on
the loop, is a send and a receive on a socket the loop already watches: no thread, no
hand-off.

So a SQLAlchemy Core statement (``records.statements`` and ``records.pg_statements`` build
each once) is compiled once (``compiled``), for asyncpg's numbered placeholders, and every
call binds its values in the compiled order and sends it on one of this module's few asyncpg
connections. asyncpg prepares a statement once per connection and then sends only its
values. One statement is its own transaction (autocommit): the hot path's writes each join
their rows in one data-modifying ``WITH``.

Values go to asyncpg as they are (str, int, aware datetime, list); JSON and JSONB columns
are written and read with ``json.dumps`` / ``json.loads``, as SQLAlchemy's JSON type does.
Rows come back as :class:`Row`: a record that answers ``row.column`` as SQLAlchemy's do, so
one ``of(row)`` builds a record from either.

A connection the server closed (a restart, ``pg_terminate_backend``) is noticed by the loop
when the socket closes, and replaced by the next statement that takes its slot.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ClauseElement

from .compiled import Compiled, compile_for
from .durability import durability_of, postgres_server_settings

__all__ = ["LOOP_CONNECTIONS", "LoopStatements", "Row", "aclose_after", "compile_statement"]

LOOP_CONNECTIONS = 3
"""Connections of one process's loop statements (opened as statements need them).

A statement holds its connection for one round trip (~0.1-0.3 ms on loopback), and a
trivial run sends five (its thread, its row, its start and end, a read back): three serve a
process at 32 clients with room for a row-lock wait."""

T = TypeVar("T")

_DIALECT = asyncpg_dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy's dialect classes are untyped
_CONNECT_PARAMETERS = frozenset(inspect.signature(asyncpg.connect).parameters)


class Row(asyncpg.Record):
    """An asyncpg record whose columns are also attributes (``row.id``), as a SQLAlchemy row's."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def compile_statement(statement: ClauseElement, keys: frozenset[str]) -> Compiled:
    """``statement`` compiled for asyncpg (``compiled``), the parameters ``keys`` given at
    execution. No bind processors: the connections' codecs write JSON as SQLAlchemy's would."""
    return compile_for(_DIALECT, statement, keys, processed=False)


async def _json_codecs(connection: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await connection.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


class LoopStatements:
    """Sends compiled statements from the event loop, each on one of a few connections.

    Not asyncpg's ``Pool``: its acquire and release (a task to shield each release, a
    reset round trip unless told otherwise) cost the loop 38-70 us a statement more than
    the statement itself costs sent here, 20-56 us (``benchmarks/loop_statements.py``). Here
    the connections are slots in an ``asyncio.Queue``: a statement takes one, opening its
    connection when the slot has none or the server closed it, and puts it back. A
    statement cancelled half-way goes back too: asyncpg asks PostgreSQL to cancel it, and
    the connection's next statement waits for that first.

    Bound to the loop of its first statement (asyncpg's connections are): :meth:`serves`
    says whether a caller's loop is it.
    """

    def __init__(
        self, connect_kwargs: Mapping[str, Any], *, connections: int = LOOP_CONNECTIONS, name: str = "the store's"
    ) -> None:
        self._connect = dict(connect_kwargs)
        self._name = name
        self._slots: asyncio.Queue[asyncpg.Connection | None] = asyncio.Queue()
        for _ in range(connections):
            self._slots.put_nowait(None)
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def serves(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self._loop is None or self._loop is loop

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bound to ``loop`` from now on, unless bound already: for a caller that queues its
        statements for a task to send later (``pg_loop_writes``)."""
        if self._loop is None:
            self._loop = loop

    @classmethod
    def for_engine(cls, engine: AsyncEngine) -> LoopStatements | None:
        """Loop statements on ``engine``'s PostgreSQL database (its URL read as its asyncpg
        dialect reads it) at the engine's durability (``durability``); ``None`` for any other
        database."""
        if engine.dialect.driver != "asyncpg":
            return None
        _args, kwargs = engine.dialect.create_connect_args(engine.url)
        # Less what only SQLAlchemy's dialect reads (``prepared_statement_cache_size``).
        connect = {key: value for key, value in kwargs.items() if key in _CONNECT_PARAMETERS}
        settings = postgres_server_settings(durability_of(engine))
        if settings:
            connect["server_settings"] = {**connect.get("server_settings", {}), **settings}
        return cls(connect)

    async def execute(self, statement: ClauseElement, params: Mapping[str, Any]) -> int:
        """Send ``statement``; how many rows it changed (its command's count)."""
        status = await self._send("execute", statement, params)
        count = status.rpartition(" ")[2]
        return int(count) if count.isdigit() else 0

    async def fetch(self, statement: ClauseElement, params: Mapping[str, Any]) -> list[Row]:
        rows: list[Row] = await self._send("fetch", statement, params)
        return rows

    async def first(self, statement: ClauseElement, params: Mapping[str, Any]) -> Row | None:
        rows = await self.fetch(statement, params)
        return rows[0] if rows else None

    async def _send(self, how: str, statement: ClauseElement, params: Mapping[str, Any]) -> Any:
        compiled = compile_statement(statement, frozenset(params))
        values = compiled.values(params)
        return await self.using(lambda connection: getattr(connection, how)(compiled.sql, *values))

    async def using(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """``work(connection)`` on a connection of its own while it runs (one of the slots,
        opened when it has none or the server closed it): for several statements in a row
        (the checkpointer's writes, ``pg_loop_writes``)."""
        if self._closed:
            raise RuntimeError(f"{self._name} PostgreSQL connections are closed")
        self.bind(asyncio.get_running_loop())
        connection = await self._slots.get()
        try:
            if connection is None or connection.is_closed():
                connection = None
                connection = await self._open()
            return await work(connection)
        finally:
            if self._closed and connection is not None:
                connection.terminate()
                connection = None
            self._slots.put_nowait(connection)

    async def _open(self) -> asyncpg.Connection:
        connection = await asyncpg.connect(record_class=Row, **self._connect)
        try:
            await _json_codecs(connection)
        except BaseException:
            connection.terminate()
            raise
        return connection

    async def aclose(self) -> None:
        """Close the connections not in use; one in use is closed when its statement ends."""
        self._closed = True
        idle = [self._slots.get_nowait() for _ in range(self._slots.qsize())]
        for _ in idle:
            self._slots.put_nowait(None)
        for connection in idle:
            if connection is not None:
                await connection.close()


async def aclose_after(closing: Awaitable[None], statements: LoopStatements | None) -> None:
    """A store's close: ``closing`` (its transactions'), then its loop statements, if any,
    whatever the first raised."""
    try:
        await closing
    finally:
        if statements is not None:
            await statements.aclose()
