"""The PostgreSQL checkpointer's read of one checkpoint, sent by asyncpg from the event loop.

Why: every run reads its thread's newest checkpoint once, as it starts. On the
checkpointer's psycopg thread that read was a hand-off there and back, and the thread
waited for the GIL the busy loop held before and after its round trip: 0.7 ms a read with
the loop idle, 11.6 ms at 8 concurrent clients, on the path of every run while the loop
itself idled. It was the last hand-off of a run on PostgreSQL; the store's statements and
the checkpointer's writes are sent from the loop already (``loop_statements``,
``pg_loop_writes``). SQLite makes the same read on the loop, in microseconds.

LangGraph still writes the query and decodes the row (``adapters.langgraph_postgres_private``);
only the transport changes, asyncpg for psycopg (``asyncpg_form``). A row LangGraph would
read more for, and every other read (``list``, a thread's history), go to the thread as before.
"""

from __future__ import annotations

import asyncio

import asyncpg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from ..adapters.langgraph_postgres_private import RecordingPostgresSaver
from .asyncpg_form import asyncpg_form
from .loop_statements import LoopStatements

__all__ = ["READ_CONNECTIONS", "PgLoopReads"]

READ_CONNECTIONS = 2
"""Connections the reads go out on: runs that start together read side by side, and a read
never waits behind a batch of writes (those have a connection of their own)."""


class PgLoopReads:
    """Reads one checkpoint at a time from one event loop (see the module docstring)."""

    def __init__(self, connections: LoopStatements) -> None:
        self._connections = connections

    @classmethod
    def to(cls, conninfo: str) -> PgLoopReads:
        """Reads from the database of a libpq URL, on :data:`READ_CONNECTIONS` opened as needed."""
        return cls(LoopStatements({"dsn": conninfo}, connections=READ_CONNECTIONS, name="the checkpointer's reads"))

    def serves(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self._connections.serves(loop)

    async def get_tuple(self, saver: RecordingPostgresSaver, config: RunnableConfig) -> CheckpointTuple | None:
        """What ``saver.get_tuple(config)`` answers; ``NotRecordable`` when LangGraph would
        read more for the row (the caller then reads LangGraph's own way)."""
        statement = saver.read_statement(config)

        async def read(connection: asyncpg.Connection) -> asyncpg.Record | None:
            sql, (values,) = await asyncpg_form(connection, statement.query, statement.rows)
            return await connection.fetchrow(sql, *values)

        row = await self._connections.using(read)
        return None if row is None else saver.loaded(dict(row.items()))

    async def aclose(self) -> None:
        await self._connections.aclose()
