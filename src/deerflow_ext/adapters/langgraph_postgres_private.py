"""langgraph-checkpoint-postgres's private cursor hook (``PostgresSaver._cursor``).

Used by the PostgreSQL checkpointer (``persistence/pg_saver.py``) to send the writes of
several operations in one round trip. ``PostgresSaver.put`` and ``put_writes`` open
``self._cursor(pipeline=True)``, call ``execute``/``executemany`` on it and close it, which
syncs: one round trip and one commit per operation, each ~0.2 ms of the Gateway's CPU
besides PostgreSQL's own (issue 16). :class:`RecordingPostgresSaver` can run them with a
recorder in place of that cursor, so the statements they would send come back as values;
the checkpointer sends the statements of every operation waiting on a connection in one
pipeline, with one sync.

LangGraph still decides every row (which values go inline, which to blobs, the metadata,
the write indexes, the upsert or insert); only the transport changes.

Fallback: when this LangGraph has no ``_cursor(pipeline=...)``, or its ``put``/``put_writes``
do anything else with the cursor (read a result, say), :meth:`RecordingPostgresSaver.record`
raises :class:`NotRecordable` and the checkpointer runs that operation as LangGraph does,
one round trip each.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection, Cursor
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

__all__ = ["NotRecordable", "RecordingPostgresSaver", "Statement", "recording_available"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Statement:
    """One ``execute`` (``many`` false, one row of parameters) or ``executemany`` call."""

    query: str
    rows: tuple[Any, ...]
    many: bool

    def send(self, cursor: Cursor[Any]) -> None:
        """Make the same call on ``cursor``."""
        if self.many:
            cursor.executemany(self.query, self.rows)
        else:
            cursor.execute(self.query, self.rows[0])


class NotRecordable(Exception):
    """The operation used its cursor for more than writes; run it as LangGraph does."""


class _Recorder:
    """What ``put``/``put_writes`` get in place of their pipelined cursor."""

    __slots__ = ("statements",)

    def __init__(self) -> None:
        self.statements: list[Statement] = []

    def execute(self, query: str, params: Any = None) -> None:
        self.statements.append(Statement(query, (params,), False))

    def executemany(self, query: str, params_seq: Any) -> None:
        self.statements.append(Statement(query, tuple(params_seq), True))

    def __getattr__(self, name: str) -> Any:
        raise NotRecordable(f"PostgresSaver used its cursor's {name!r}")


def recording_available() -> bool:
    """Whether this LangGraph's ``PostgresSaver`` writes through ``_cursor(pipeline=...)``."""
    cursor = getattr(PostgresSaver, "_cursor", None)
    if cursor is None:
        return False
    try:
        return "pipeline" in inspect.signature(cursor).parameters
    except (TypeError, ValueError):
        return False


_AVAILABLE = recording_available()


class RecordingPostgresSaver(PostgresSaver):
    """``PostgresSaver`` whose writes can hand back their statements instead of sending them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recording = threading.local()  # sync methods may run on any caller's thread

    def record(self, write: Callable[..., T], /, *args: Any) -> tuple[T, list[Statement]]:
        """``write(*args)`` (this saver's ``put`` or ``put_writes``) and the statements it
        would have sent; nothing is sent. Raises :class:`NotRecordable` when it cannot be
        recorded (nothing was sent then either)."""
        if not _AVAILABLE:
            raise NotRecordable("PostgresSaver has no _cursor(pipeline=...)")
        recorder = self._recording.recorder = _Recorder()
        try:
            result = write(*args)
        finally:
            self._recording.recorder = None
        return result, recorder.statements

    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Cursor[DictRow]]:
        recorder = getattr(self._recording, "recorder", None)
        if recorder is not None and pipeline:
            yield recorder  # stands in for the cursor (writes only)
            return
        with super()._cursor(pipeline=pipeline) as cursor:
            yield cursor

    def send(self, statements: Sequence[Statement]) -> None:
        """``statements`` in one pipeline on this saver's connection: one sync, so one
        round trip and one implicit transaction. A statement PostgreSQL refuses rolls them
        all back; one psycopg refuses before sending it (a NUL in a text) raises after those
        before it were committed, as in LangGraph's own pipeline."""
        with self.lock, _connection(self.conn) as conn, conn.pipeline(), conn.cursor(binary=True) as cursor:
            for statement in statements:
                statement.send(cursor)


def _connection(
    conn: Connection[DictRow] | ConnectionPool[Connection[DictRow]],
) -> AbstractContextManager[Connection[DictRow]]:
    """The saver's connection, checked out of its pool when it has one."""
    return conn.connection() if isinstance(conn, ConnectionPool) else nullcontext(conn)
