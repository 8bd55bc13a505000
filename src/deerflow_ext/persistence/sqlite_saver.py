"""The SQLite checkpointer: LangGraph's ``SqliteSaver``, each async operation one thread hop.

LangGraph's ``AsyncSqliteSaver`` talks to SQLite through aiosqlite, which hands every
``execute``, ``fetch``, cursor close and ``commit`` to its worker thread and back: a queue
put, a GIL hand-off and a ``call_soon_threadsafe`` each time, on the event loop's CPU. A
checkpoint save is three such hops, a write save four, a read four or more, and the lead
graph saves 12-18 checkpoints a run (issue 16 counted ~90 checkpointer hops per trivial
run). Here the whole operation runs on one dedicated thread instead, handed over once
(``threaded_saver``): the SQL, the statements and rows are exactly those of LangGraph's own
synchronous saver (this class *is* that saver), only where they run changes. SQLite has
one writer at a time, so there is one connection and one thread.

The connection is opened with ``check_same_thread=False``, as LangGraph documents, because
the synchronous methods run on their callers' threads under ``SqliteSaver``'s own lock.

Serialising a checkpoint or a write now happens on the worker thread, while the graph goes
on with its next step. LangGraph's synchronous loop does the same (it submits ``put`` and
``put_writes`` to background threads), which is why it hands a saver a copy of the
checkpoint; the async loop already lets a save start after the next step has begun.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from .one_thread import OneThread
from .threaded_saver import OnThreads

__all__ = ["OneThreadSqliteSaver", "open_sqlite_saver"]


class OneThreadSqliteSaver(OnThreads, SqliteSaver):
    """``SqliteSaver`` whose async methods each run whole on ``thread``, one hop each."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        thread: OneThread,
        *,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(conn, serde=serde)
        self.thread = thread

    async def asetup(self) -> None:
        """Create or migrate the tables (``SqliteSaver.setup``), on the saver's thread."""
        await self.thread.run(self.setup)


@asynccontextmanager
async def open_sqlite_saver(path: str, *, pragmas: Sequence[str] = ()) -> AsyncIterator[OneThreadSqliteSaver]:
    """A set-up saver on a new connection to ``path`` and its own thread, both closed after.

    ``pragmas`` run on the connection first (the host's ``synchronous`` setting). The
    connection is opened as ``aiosqlite.connect`` opened it for ``AsyncSqliteSaver``
    (sqlite3's defaults: deferred transactions, a 5 s busy timeout), so locking behaves
    as before.
    """
    thread = OneThread("deerflow-checkpointer")
    try:
        conn = await thread.run(sqlite3.connect, path, check_same_thread=False)
        try:
            for pragma in pragmas:
                await thread.run(conn.execute, f"PRAGMA {pragma}")
            saver = OneThreadSqliteSaver(conn, thread)
            await saver.asetup()
            yield saver
        finally:
            await thread.run(conn.close)
    finally:
        thread.close()
