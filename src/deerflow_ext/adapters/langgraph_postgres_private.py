"""langgraph-checkpoint-postgres's private cursor hook (``PostgresSaver._cursor``) and row
loading (``PostgresSaver._load_checkpoint_tuple``).

Used by the PostgreSQL checkpointer (``persistence/pg_saver.py``) to send the writes of
several operations in one round trip. ``PostgresSaver.put`` and ``put_writes`` open
``self._cursor(pipeline=True)``, call ``execute``/``executemany`` on it and close it, which
syncs: one round trip and one commit per operation, each ~0.2 ms of the Gateway's CPU
besides PostgreSQL's own. :class:`RecordingPostgresSaver` can run them with a
recorder in place of that cursor, so the statements they would send come back as values;
the checkpointer sends the statements of every operation waiting on a connection in one
pipeline, with one sync.

LangGraph still decides every row (which values go inline, which to blobs, the metadata,
the write indexes, the upsert or insert); only the transport changes.

Fallback: when this LangGraph has no ``_cursor(pipeline=...)``, or its ``put``/``put_writes``
do anything else with the cursor (read a result, say), :meth:`RecordingPostgresSaver.record`
raises :class:`NotRecordable` and the checkpointer runs that operation as LangGraph does,
one round trip each.

Reads: ``get_tuple`` sends ``SELECT_SQL`` (public) with a ``WHERE`` of its own and turns the
row into a tuple with ``_load_checkpoint_tuple``. :meth:`RecordingPostgresSaver.read_statement`
is that query and :meth:`RecordingPostgresSaver.loaded` that tuple, so the checkpointer can
send the query from the event loop (``persistence/pg_loop_reads.py``) and LangGraph still
decodes every row. A row LangGraph would read more for (a checkpoint from before version 4,
whose pending sends it migrates with a second query), or a LangGraph without the loader,
raises :class:`NotRecordable`: that read runs as LangGraph runs it.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection, Cursor
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

__all__ = ["NotRecordable", "RecordingPostgresSaver", "Statement", "loading_available", "recording_available"]

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
    """The operation cannot be made this way (a write used its cursor for more than writes,
    a read needs more than its one row); run it as LangGraph does."""


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


def loading_available() -> bool:
    """Whether this LangGraph's ``PostgresSaver`` makes a tuple of a row in ``_load_checkpoint_tuple``."""
    return callable(getattr(PostgresSaver, "_load_checkpoint_tuple", None))


_AVAILABLE = recording_available()
_LOADS = loading_available()


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

    def read_statement(self, config: RunnableConfig) -> Statement:
        """The query ``get_tuple(config)`` sends: the checkpoint ``config`` names, or else the
        newest of its thread and namespace."""
        configurable = config["configurable"]
        thread_id, namespace = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            where = "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
            return Statement(self.SELECT_SQL + where, ((thread_id, namespace, checkpoint_id),), False)
        where = "WHERE thread_id = %s AND checkpoint_ns = %s ORDER BY checkpoint_id DESC LIMIT 1"
        return Statement(self.SELECT_SQL + where, ((thread_id, namespace),), False)

    def loaded(self, row: dict[str, Any]) -> CheckpointTuple:
        """The tuple ``get_tuple`` makes of ``row`` (of :meth:`read_statement`, as psycopg's
        dict rows hold it); :class:`NotRecordable` when it would read more first."""
        if not _LOADS:
            raise NotRecordable("PostgresSaver has no _load_checkpoint_tuple")
        if row["checkpoint"]["v"] < 4 and row["parent_checkpoint_id"]:
            raise NotRecordable("a checkpoint from before version 4: LangGraph migrates its pending sends")
        loaded: CheckpointTuple = self._load_checkpoint_tuple(row)
        return loaded

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
