"""The SQLite checkpointer: LangGraph's ``SqliteSaver``, each async operation one thread hop.

LangGraph's ``AsyncSqliteSaver`` talks to SQLite through aiosqlite, which hands every
``execute``, ``fetch``, cursor close and ``commit`` to its worker thread and back: a queue
put, a GIL hand-off and a ``call_soon_threadsafe`` each time, on the event loop's CPU. A
checkpoint save is three such hops, a write save four, a read four or more, and the lead
graph saves 12-18 checkpoints a run (issue 16 counted ~90 checkpointer hops per trivial
run). Here the whole operation runs on one dedicated thread instead, handed over once: the
SQL, the statements and rows are exactly those of LangGraph's own synchronous saver (this
class *is* that saver), only where they run changes.

Safe from any thread and any event loop: an async method awaits its hop on whichever loop
calls it, the one worker thread runs the hops in turn, and the synchronous methods, run on
their caller's thread, take ``SqliteSaver``'s own lock as they always do (the connection is
opened with ``check_same_thread=False`` for that reason, as LangGraph documents).

Serialising a checkpoint or a write now happens on the worker thread, while the graph goes
on with its next step. LangGraph's synchronous loop does the same (it submits ``put`` and
``put_writes`` to background threads), which is why it hands a saver a copy of the
checkpoint; the async loop already lets a save start after the next step has begun.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from .one_thread import OneThread

__all__ = ["FIRST_PAGE", "LAST_PAGE", "OneThreadSqliteSaver", "open_sqlite_saver"]

FIRST_PAGE = 16
"""Checkpoints ``alist`` reads in its first hop when no ``limit`` bounds it.

A reader that stops early (rollback looks for the newest checkpoint another run wrote,
past the up to 18 of the rolled-back run) should not pay for a whole thread's history;
pages double from here so a full read stays a handful of hops."""
LAST_PAGE = 256
"""The largest page ``alist`` reads in one hop."""


class OneThreadSqliteSaver(SqliteSaver):
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

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.thread.run(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # SqliteSaver.list holds the saver's lock until its generator ends, so each hop
        # reads one bounded page to the end and the next page starts `before` the last
        # row. Checkpoint ids order rows only within one thread and namespace: any other
        # query is read whole in one hop.
        pageable = (
            config is not None
            and config["configurable"].get("checkpoint_ns") is not None
            and not get_checkpoint_id(config)
        )
        if not pageable:
            for row in await self.thread.run(self._page, config, filter, before, limit):
                yield row
            return
        page = FIRST_PAGE if limit is None else LAST_PAGE
        left = limit
        while True:
            want = page if left is None else min(page, left)
            rows = await self.thread.run(self._page, config, filter, before, want)
            for row in rows:
                yield row
            if len(rows) < want:
                return
            if left is not None:
                left -= want
                if left <= 0:
                    return
            before = rows[-1].config
            page = min(2 * page, LAST_PAGE)

    def _page(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        return list(self.list(config, filter=filter, before=before, limit=limit))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self.thread.run(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.thread.run(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.thread.run(self.delete_thread, thread_id)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self.thread.run(self.get_delta_channel_history, config=config, channels=channels)


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
