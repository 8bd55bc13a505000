"""A LangGraph synchronous saver whose async methods each run whole on a thread of its own.

Why: LangGraph's async savers talk to the database through an async driver, so every step
of an operation (execute, fetch, commit, the pipeline's sync) is a separate wake-up of the
event loop, and the serialisation of a checkpoint happens on the loop or hops to a thread
pool and back. The synchronous saver of the same backend does the same work with the same
statements in one call. Handing that call to a dedicated thread (:class:`~.one_thread.OneThread`)
is one hand-off per operation; the loop goes on with other runs while it runs.

A saver may have several (saver, thread) pairs, *shards*, each with its own connection
(``pg_saver``): an operation goes to the shard of its LangGraph thread, so one thread's
operations keep the order they were made in, on one connection, while different threads'
run side by side. Every shard reads and writes the same tables, so an operation that names
no thread can go to any of them; it goes to the first.

Safe from any thread and any event loop: an async method awaits its hop on whichever loop
calls it, and the synchronous methods, run on their caller's thread, take the saver's own
lock as they always do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
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

from .one_thread import OneThread

__all__ = ["FIRST_PAGE", "LAST_PAGE", "OnThreads", "Shard"]

FIRST_PAGE = 16
"""Checkpoints ``alist`` reads in its first hop when no ``limit`` bounds it.

A reader that stops early (rollback looks for the newest checkpoint another run wrote,
past the up to 18 of the rolled-back run) should not pay for a whole thread's history;
pages double from here so a full read stays a handful of hops."""
LAST_PAGE = 256
"""The largest page ``alist`` reads in one hop."""

Shard = tuple[Any, OneThread]
"""A synchronous saver and the thread its operations run on."""


def _read_page(
    saver: Any,
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> list[CheckpointTuple]:
    """One bounded page of ``saver.list``, read to its end (on the shard's thread)."""
    return list(saver.list(config, filter=filter, before=before, limit=limit))


class OnThreads:
    """The async half of a LangGraph saver, over a synchronous saver's methods.

    Mixed in before the synchronous saver class. :meth:`_shard` says where an operation on
    a LangGraph thread runs; the default is this saver on ``self.thread``.
    """

    thread: OneThread

    def _shard(self, thread_id: Any) -> Shard:
        return self, self.thread

    def _shard_of(self, config: RunnableConfig | None) -> Shard:
        return self._shard(None if config is None else config["configurable"].get("thread_id"))

    async def _before_read(self) -> None:
        """Awaited first by every read. Nothing here: a saver that acknowledges writes before
        they are written makes its reads wait for them (``pg_saver``)."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        await self._before_read()
        saver, thread = self._shard_of(config)
        return await thread.run(saver.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # A listing is as long as a thread's history (a client asks for 1,000 states): its
        # pages are read and deserialised on the thread, never on the event loop (``run_aside``),
        # and the loop gets a turn between rows, for what the reader does with each.
        # The synchronous ``list`` holds the saver's lock until its generator ends, so each
        # hop reads one bounded page to the end and the next page starts `before` the last
        # row. Checkpoint ids order rows only within one thread and namespace: any other
        # query is read whole in one hop.
        await self._before_read()
        saver, thread = self._shard_of(config)
        pageable = (
            config is not None
            and config["configurable"].get("checkpoint_ns") is not None
            and not get_checkpoint_id(config)
        )
        if not pageable:
            for row in await thread.run_aside(_read_page, saver, config, filter, before, limit):
                yield row
                await asyncio.sleep(0)
            return
        page = FIRST_PAGE if limit is None else LAST_PAGE
        left = limit
        while True:
            want = page if left is None else min(page, left)
            rows = await thread.run_aside(_read_page, saver, config, filter, before, want)
            for row in rows:
                yield row
                await asyncio.sleep(0)  # what the reader makes of each row, one at a time
            if len(rows) < want:
                return
            if left is not None:
                left -= want
                if left <= 0:
                    return
            before = rows[-1].config
            page = min(2 * page, LAST_PAGE)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        next_config: RunnableConfig = await self._write(
            self._shard_of(config), "put", (config, checkpoint, metadata, new_versions)
        )
        return next_config

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._write(self._shard_of(config), "put_writes", (config, writes, task_id, task_path))

    async def _write(self, shard: Shard, name: str, args: tuple[Any, ...]) -> Any:
        """The shard's saver's write method ``name`` (``put``, ``put_writes``) on its thread;
        a saver that sends several writes at once overrides this (``pg_saver``)."""
        saver, thread = shard
        return await thread.run(getattr(saver, name), *args)

    async def adelete_thread(self, thread_id: str) -> None:
        saver, thread = self._shard(thread_id)
        await thread.run(saver.delete_thread, thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``prune`` on each thread's own shard, so it keeps its place among that thread's
        operations (a saver without ``prune`` raises ``NotImplementedError``, as LangGraph's).
        Always on the shard's thread, never on the event loop: a prune is as big as the
        threads' histories (``run_aside``); after the writes still queued (``_before_read``)."""
        await self._before_read()
        groups: dict[int, tuple[Shard, list[str]]] = {}
        for thread_id in thread_ids:
            shard = self._shard(thread_id)
            groups.setdefault(id(shard[1]), (shard, []))[1].append(thread_id)
        for (saver, thread), ids in groups.values():
            await thread.run_aside(saver.prune, ids, strategy=strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        await self._before_read()
        saver, thread = self._shard_of(config)
        return await thread.run(saver.get_delta_channel_history, config=config, channels=channels)
