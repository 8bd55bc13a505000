"""The SQLite checkpointer: LangGraph's ``SqliteSaver``, each async operation one thread hop.

LangGraph's ``AsyncSqliteSaver`` talks to SQLite through aiosqlite, which hands every
``execute``, ``fetch``, cursor close and ``commit`` to its worker thread and back: a queue
put, a GIL hand-off and a ``call_soon_threadsafe`` each time, on the event loop's CPU. A
checkpoint save is three such hops, a write save four, a read four or more, and the lead
graph saves 12-18 checkpoints a run (we counted ~90 checkpointer hops per trivial
run). Here the whole operation runs on one dedicated thread instead, handed over once
(``threaded_saver``): the SQL, the statements and rows are exactly those of LangGraph's own
synchronous saver (this class *is* that saver), only where they run changes. SQLite has
one writer at a time, so there is one connection and one thread, a loop-first one
(``one_thread``): an operation runs right on the event loop when nothing is queued for the
thread, and goes to the thread when something is, or when another connection holds the lock
(the connection waits for none itself; the thread waits as long as the host's other SQLite
connections do).

The connection is opened with ``check_same_thread=False``, as LangGraph documents, because
the synchronous methods run on their callers' threads under ``SqliteSaver``'s own lock.

A save handed to the thread is serialised there, while the graph goes on with its next step.
LangGraph's synchronous loop does the same (it submits ``put`` and ``put_writes`` to
background threads), which is why it hands a saver a copy of the checkpoint; the async loop
already lets a save start after the next step has begun.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from ..adapters.langgraph_sqlite_private import prune_sqlite_saver
from .checkpoint_copy import copy_checkpoints
from .engine import SQLITE_TIMEOUT_SECONDS, is_sqlite_busy, wait_for_no_lock
from .one_thread import OneThread
from .threaded_saver import OnThreads
from .wal_checkpoints import checkpoint_rarely

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

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Every checkpoint of the source thread, pending writes included, on the target
        (``checkpoint_copy``), here on the caller's thread."""
        copy_checkpoints(self, source_thread_id, target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` on the saver's thread, never on the event loop: a copy is as
        big as the thread's history."""
        await self.thread.run_aside(copy_checkpoints, self, source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """LangGraph's ``prune`` (``delete``, ``keep_latest``), which ``SqliteSaver`` lacks:
        the saver's own tables, in one transaction under its lock
        (``adapters.langgraph_sqlite_private``); ``aprune`` runs it on the saver's thread."""
        with self.lock:
            prune_sqlite_saver(self.conn, thread_ids, strategy)

    async def asetup(self) -> None:
        """Create or migrate the tables (``SqliteSaver.setup``), on the saver's thread."""
        await self.thread.run(self.setup)


@asynccontextmanager
async def open_sqlite_saver(path: str, *, pragmas: Sequence[str] = ()) -> AsyncIterator[OneThreadSqliteSaver]:
    """A set-up saver on a new connection to ``path`` and its own thread, both closed after.

    ``pragmas`` run on the connection first (the host's ``synchronous`` setting). The
    connection is opened as ``aiosqlite.connect`` opened it for ``AsyncSqliteSaver``
    (sqlite3's defaults: deferred transactions), except that it waits for no lock: a busy
    operation is retried on the thread for as long as the host's other SQLite connections
    wait (``SQLITE_TIMEOUT_SECONDS``).
    """
    thread = OneThread("deerflow-checkpointer", loop_first=is_sqlite_busy, patience=SQLITE_TIMEOUT_SECONDS)
    try:
        conn = await thread.run(sqlite3.connect, path, check_same_thread=False)
        try:
            wait_for_no_lock(conn)
            checkpoint_rarely(conn)
            for pragma in pragmas:
                await thread.run(conn.execute, f"PRAGMA {pragma}")
            saver = OneThreadSqliteSaver(conn, thread)
            await saver.asetup()
            yield saver
        finally:
            await thread.run(conn.close)
    finally:
        thread.close()
