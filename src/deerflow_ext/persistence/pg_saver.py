"""The PostgreSQL checkpointer: LangGraph's ``PostgresSaver`` on a connection of its own, on
a thread of its own; its writes made by LangGraph on the event loop and sent from there,
those waiting together in one batch (``pg_loop_writes``), and its read of one checkpoint
(each run's first) sent from there too (``pg_loop_reads``). Every other read is one hop to
the thread.

Why not LangGraph's ``AsyncPostgresSaver`` on one connection, as before:

* **One operation at a time, a round trip each.** Every checkpoint and write of every run
  went through that connection in turn (the saver holds a lock per operation), each its own
  round trip and commit, ~0.2 ms of the Gateway's CPU and PostgreSQL's work, 14 times a
  trivial run. At 32 concurrent runs it was busy ~95% of the time and runs queued on it.
  Here the writes waiting together (a task's writes and the checkpoint after them; under
  load, many runs') are sent together: from the loop in one batch of ``executemany`` calls
  (``pg_loop_writes``), from any other loop in one pipeline with one sync on the thread
  (:func:`_write_batch`); LangGraph still makes every row
  (``adapters/langgraph_postgres_private``).
* **A connection that never came back.** After a PostgreSQL restart, or an administrator
  terminating the sessions, that one connection stayed closed and every later run failed
  until the Gateway was restarted. The connection here is a one-connection ``psycopg_pool``
  pool: a closed connection is replaced, and one the server closed while it sat idle is
  noticed before use, without a round trip (``liveness``), as the host's engine does for
  its own pools.
* **The loop's CPU.** Each async step of an operation (the pipeline, each execute, the sync)
  was a wake-up of the event loop, and each serialisation a hop to a thread pool and back.
  The synchronous saver does a read's statements in one call, handed to its thread once.
  Writes went that way too, until the thread's psycopg pipeline (3.6 ms of CPU a run, in
  Python) was what kept the process bound by its GIL: asyncpg sends them from the loop for
  less (``pg_loop_writes``).

Why one connection (:data:`CONNECTIONS`) and not several: the saver can spread LangGraph
threads over several connections, each with its thread (*shards*, ``threaded_saver``; a
LangGraph thread's operations stay on one, in order). It did, on four, until batching made
that a loss: each shard's batches were a quarter as large, so there were more round trips,
and four threads (and their pools' eight) woke for them and waited for the GIL the event
loop holds. The process is bound by that one GIL: on one connection the Gateway
served 1.21x the runs a second at 8 clients and 1.27x at 32, side by side with four.

Connections are opened as ``PostgresSaver.from_conn_string`` opens them (autocommit,
``prepare_threshold=0``, dict rows), which LangGraph documents as required for its pools.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from ..adapters.langgraph_postgres_private import NotRecordable, RecordingPostgresSaver, Statement
from .liveness import closed_by_server
from .one_thread import OneThread, Outcome
from .pg_loop_reads import PgLoopReads
from .pg_loop_writes import PgLoopWrites, caught_up, writes_behind
from .threaded_saver import OnThreads, Shard

__all__ = ["CONNECTIONS", "ShardedPostgresSaver", "open_postgres_saver"]

CONNECTIONS = 1
"""Read connections (and threads) of one process's checkpointer (see the module docstring);
its writes from the loop have one more connection of their own (``pg_loop_writes``), and
its reads from the loop two (``pg_loop_reads``).

A read takes its turn on its shard's thread (and so does a write from another loop: it
waits for the batch in flight there, then goes in the next). More connections would
shorten those waits on a slow link, at the price of more threads waiting for the GIL;
``open_postgres_saver(connections=...)`` takes another count."""

CONNECT_TIMEOUT_SECONDS = 30.0
"""How long startup waits for the connections, and an operation for its connection."""

DictPool = ConnectionPool[psycopg.Connection[DictRow]]
"""A pool of connections whose rows are dicts (``_CONNECTION_KWARGS``), as ``PostgresSaver`` needs."""

_CONNECTION_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


class ShardedPostgresSaver(OnThreads, RecordingPostgresSaver):
    """``PostgresSaver`` whose async reads run on the shard of their LangGraph thread, and
    whose async writes are made on the loop and sent by :attr:`loop_writes` with those
    waiting beside them (from any other loop: batched on the shard's thread), and whose
    ``aget_tuple`` reads from the loop with :attr:`loop_reads` (from any other: on the thread).

    The saver itself is the first shard (its pool, lock and :attr:`thread`): the synchronous
    methods, ``setup`` and whatever names no thread use it.
    """

    def __init__(
        self,
        shards: Sequence[tuple[DictPool, OneThread]],
        loop_writes: PgLoopWrites | None = None,
        loop_reads: PgLoopReads | None = None,
    ) -> None:
        (pool, thread), *rest = shards
        super().__init__(pool)
        self.pool = pool
        self.thread = thread
        others = ((RecordingPostgresSaver(p, serde=self.serde), t) for p, t in rest)
        self.shards: tuple[Shard, ...] = ((self, thread), *others)
        self.loop_writes = loop_writes
        self.loop_reads = loop_reads

    def _shard(self, thread_id: Any) -> Shard:
        if thread_id is None:
            return self.shards[0]
        return self.shards[zlib.crc32(str(thread_id).encode()) % len(self.shards)]

    def writes_behind(self) -> AbstractAsyncContextManager[None]:
        """The scope of a run's graph: its loop writes acknowledged once queued, all of them
        written by its end (``pg_loop_writes.writes_behind``; ``persistence.checkpointer``)."""
        return writes_behind()

    async def _before_read(self) -> None:
        """A read in a run's scope sees the run's writes: it waits for those still queued."""
        await caught_up()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        reads = self.loop_reads
        if reads is not None and reads.serves(asyncio.get_running_loop()):
            await self._before_read()
            saver, _ = self._shard_of(config)
            try:
                return await reads.get_tuple(saver, config)
            except NotRecordable:
                pass  # LangGraph reads more for this row: its own way, on the thread
        return await super().aget_tuple(config)

    async def _write(self, shard: Shard, name: str, args: tuple[Any, ...]) -> Any:
        """Made by LangGraph here, sent from this loop (``pg_loop_writes``); from any other
        loop, or when LangGraph's write cannot be recorded, on the shard's thread."""
        saver, thread = shard
        writes = self.loop_writes
        if writes is None or not writes.serves(asyncio.get_running_loop()):
            return await thread.run_batched(_write_batch, (saver, name, args))
        write = getattr(saver, name)
        try:
            result, statements = saver.record(write, *args)
        except NotRecordable:
            await writes.idle()  # after the writes before it
            return await thread.run(write, *args)
        if not writes.takes(statements):  # LangGraph's SQL changed its placeholders
            await writes.idle()
            await thread.run(saver.send, statements)
        elif statements:
            await writes.send(statements)
        return result


_Write = tuple[RecordingPostgresSaver, str, tuple[Any, ...]]
"""A batched write: the shard's saver, the name of its method (``put``, ``put_writes``), the arguments."""


def _write_batch(writes: list[_Write]) -> list[Outcome]:
    """The writes waiting on one shard's thread, made by LangGraph in order and sent together.

    Each write's statements are recorded, then all of them go in one pipeline (one round
    trip, one implicit transaction). A write LangGraph fails to make (its serialisation, say)
    fails alone. A statement refused by PostgreSQL (or by psycopg, before sending it) can take
    the others with it, so then each write is sent again alone and only the one at fault
    fails: every statement is an upsert, so a write sent twice leaves what it leaves sent once.
    A lost connection fails them all (the next write finds a new one: ``_still_open``). A
    write that cannot be recorded (``NotRecordable``) runs as LangGraph runs it, after those
    before it were sent.
    """
    outcomes: list[Outcome] = []
    recorded: list[tuple[int, list[Statement]]] = []
    for saver, name, args in writes:
        write = getattr(saver, name)
        try:
            result, statements = saver.record(write, *args)
        except NotRecordable:
            _send(saver, recorded, outcomes)
            recorded = []
            outcomes.append(_made(write, args))
            continue
        except Exception as exc:
            outcomes.append((None, exc))
            continue
        outcomes.append((result, None))
        recorded.append((len(outcomes) - 1, statements))
    _send(writes[0][0], recorded, outcomes)
    return outcomes


def _made(write: Any, args: tuple[Any, ...]) -> Outcome:
    try:
        return write(*args), None
    except Exception as exc:
        return None, exc


def _send(saver: RecordingPostgresSaver, recorded: list[tuple[int, list[Statement]]], outcomes: list[Outcome]) -> None:
    """Send ``recorded`` writes in one pipeline; a failure lands on the outcomes of the
    writes it belongs to (see :func:`_write_batch`)."""
    if not recorded:
        return
    try:
        saver.send([statement for _, statements in recorded for statement in statements])
        return
    except psycopg.OperationalError as exc:  # the connection, not a statement: all of them
        for index, _ in recorded:
            outcomes[index] = (None, exc)
        return
    except Exception as exc:
        if len(recorded) == 1:  # the one at fault is known
            outcomes[recorded[0][0]] = (None, exc)
            return
    for index, statements in recorded:  # find it: each write again, alone
        try:
            saver.send(statements)
        except Exception as exc:
            outcomes[index] = (None, exc)


def _still_open(conn: psycopg.Connection[DictRow]) -> None:
    """The pool's check at checkout: a connection the server closed while it sat idle is
    replaced before use (``liveness``)."""
    if closed_by_server(conn):
        raise psycopg.OperationalError("the checkpointer's connection was closed")


def _open_pool(conninfo: str, name: str) -> DictPool:
    pool = ConnectionPool(
        conninfo,
        min_size=1,
        max_size=1,
        kwargs=_CONNECTION_KWARGS,
        check=_still_open,
        timeout=CONNECT_TIMEOUT_SECONDS,
        num_workers=1,  # its background work is replacing one connection: one thread, not three
        name=name,
        open=False,
    )
    pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
    return pool


def _setup(saver: ShardedPostgresSaver, lock_key: int) -> None:
    """``setup()`` under a session advisory lock, taken in turns by Gateways starting together.

    ``setup()`` records its migrations with plain INSERTs, so two processes starting at once
    would collide. The waiter polls instead of blocking in ``pg_advisory_lock``: ``setup()``
    runs CREATE INDEX CONCURRENTLY, which waits for every open statement, a blocked
    waiter's included.
    """
    with saver.pool.connection() as conn:  # held across setup: one pool connection
        while not _locked(conn, lock_key):
            time.sleep(0.1)
        try:
            PostgresSaver(conn, serde=saver.serde).setup()
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key,))


def _locked(conn: psycopg.Connection[DictRow], lock_key: int) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (lock_key,)).fetchone()
    return bool(row and row["got"])


@asynccontextmanager
async def open_postgres_saver(
    conninfo: str, *, lock_key: int, connections: int = CONNECTIONS
) -> AsyncIterator[ShardedPostgresSaver]:
    """A set-up saver on ``connections`` new connections to ``conninfo`` and their threads,
    all closed after."""
    async with AsyncExitStack() as stack:
        shards: list[tuple[DictPool, OneThread]] = []
        for n in range(connections):
            thread = OneThread(f"deerflow-checkpointer-{n}")
            stack.callback(thread.close)
            pool = await thread.run(_open_pool, conninfo, f"deerflow-checkpointer-{n}")
            stack.push_async_callback(thread.run, pool.close)
            shards.append((pool, thread))
        writes = PgLoopWrites.to(conninfo)
        stack.push_async_callback(writes.aclose)  # before the threads: a fallback write may wait there
        reads = PgLoopReads.to(conninfo)
        stack.push_async_callback(reads.aclose)
        saver = ShardedPostgresSaver(shards, writes, reads)
        await saver.thread.run(_setup, saver, lock_key)
        yield saver
