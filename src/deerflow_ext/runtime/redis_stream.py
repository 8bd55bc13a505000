"""Run streams in Redis Streams, so any Gateway process can serve any run's stream.

One Redis stream per run, ``<prefix>run:<run_id>:events``, written only by the process
running the run. Entry ids are the run's event sequence numbers (``<n>-0``, set explicitly
by that one writer), so an SSE id is the same ``n`` whichever bridge issued it and the
retention arithmetic is the in-memory bridge's: ``XADD ... MAXLEN ~ retain_events`` trims
the oldest entries, and a cursor below the first retained entry is reported as missed.
A stream expires a day after its first event (a run whose process died never ends it) and
``retain_seconds`` after its ``end``. Retention here is bounded in events only (the byte
budgets are the in-memory bridge's; Redis's ``maxmemory`` bounds the rest), but a read is
cut at ``run_log.MAX_BATCH_BYTES`` like the in-memory bridge's, so a reader holds one
bounded batch, and asks for fewer entries once a run's events were seen to be large.

Publishing does not wait on Redis: events queue in the process and a background task writes
them in pipelined batches, in order (only the first event and the ``end`` are awaited). If
Redis fails, the batch is logged and dropped — the run itself goes on and is persisted;
readers then see the stream close with an ``end`` built from the run's persisted status
(``gateway.sse``). Readers block in ``XREAD`` on a pooled
connection each, for at most their heartbeat interval. A read that fails (Redis down or
restarting) answers "nothing retained" instead of raising, so the SSE layer decides from the
run's persisted status: a finished run's stream ends with ``not_retained`` and ``end``, a live
one waits and reads again — and, Redis back, resumes after a ``not_retained`` for what was
lost with it. Without this the response was cut mid-body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from .stream import (
    DEFAULT_RETAIN_EVENTS,
    DEFAULT_RETAIN_SECONDS,
    END_EVENT,
    MAX_BATCH,
    MAX_BATCH_BYTES,
    Missed,
    RunStreamWriter,
    StreamBatch,
    StreamEvent,
    cut_by_size,
    position_of,
)
from .wire import dumps

__all__ = ["ORPHAN_TTL_SECONDS", "RedisStreamBridge", "RedisUnavailableError"]

logger = logging.getLogger("deerflow_ext.runtime")

ORPHAN_TTL_SECONDS = 24 * 3600
_PENDING_LIMIT = 10_000


class RedisUnavailableError(RuntimeError):
    """``DEERFLOW_REDIS_URL`` names a Redis this process cannot reach."""


def _entry(raw: tuple[str, dict[str, str]]) -> StreamEvent:
    entry_id, fields = raw
    return StreamEvent(entry_id.partition("-")[0], fields.get("e", ""), fields.get("d", "null"))


class _RedisWriter:
    def __init__(self, bridge: RedisStreamBridge, run_id: str) -> None:
        self.run_id = run_id
        self._bridge = bridge
        self._key = bridge.key(run_id)
        self._next = 1
        self._pending: list[tuple[int, str, str]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    async def publish(self, event: str, data: Any = None) -> None:
        if self._closed:
            return
        self._closed = event == END_EVENT
        self._pending.append((self._next, event, dumps(data)))
        self._next += 1
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush(), name=f"deerflow-stream-{self.run_id}")
        # The first event is in Redis before publish returns: the run's id is handed to
        # clients right after it, and a reader must find the stream. The end is, so that a
        # run counts as streamed to its end only once readers can see it.
        if self._next == 2 or self._closed or len(self._pending) > _PENDING_LIMIT:
            await asyncio.shield(self._flusher)

    async def close(self, data: Any = None) -> None:
        await self.publish(END_EVENT, data)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._bridge.append(self._key, batch)
            except Exception as exc:
                logger.warning(
                    "run %s: could not write %d stream event(s) to Redis (%s: %s); readers will miss them",
                    self.run_id,
                    len(batch),
                    type(exc).__name__,
                    exc,
                )


class RedisStreamBridge:
    """The shared bridge (``DEERFLOW_REDIS_URL``)."""

    shared = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "deerflow:",
        retain_events: int = DEFAULT_RETAIN_EVENTS,
        retain_seconds: float = DEFAULT_RETAIN_SECONDS,
    ) -> None:
        from redis.asyncio import Redis

        self.url = url
        self.prefix = prefix
        self.retain_events = retain_events
        self.retain_seconds = retain_seconds
        self._redis: Any = Redis.from_url(url, decode_responses=True)
        self._event_bytes: dict[str, int] = {}  # per run: the largest event a read has seen
        self._read_failing = False  # one log line per outage, not one per reader and heartbeat

    def key(self, run_id: str) -> str:
        return f"{self.prefix}run:{run_id}:events"

    async def start(self) -> None:
        """Check that Redis answers; raises :class:`RedisUnavailableError` with the URL."""
        try:
            await self._redis.ping()
        except Exception as exc:
            raise RedisUnavailableError(
                f"DEERFLOW_REDIS_URL: cannot reach Redis at {self.url} ({type(exc).__name__}: {exc})"
            ) from exc

    def writer(self, run_id: str) -> RunStreamWriter:
        return _RedisWriter(self, run_id)

    async def append(self, key: str, batch: Sequence[tuple[int, str, str]]) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            for seq, event, data in batch:
                pipe.xadd(key, {"e": event, "d": data}, id=f"{seq}-0", maxlen=self.retain_events, approximate=True)
                if seq == 1:
                    pipe.expire(key, ORPHAN_TTL_SECONDS)
                if event == END_EVENT:
                    pipe.pexpire(key, max(1, round(self.retain_seconds * 1000)))
            await pipe.execute()

    async def read(self, run_id: str, after: str | None, *, wait: float = 0.0) -> StreamBatch:
        try:
            batch = await self._read(run_id, after, wait=wait)
        except Exception as exc:
            if not self._read_failing:
                logger.warning(
                    "run streams: Redis read failed (%s: %s); streams wait for it or end from the runs' status",
                    type(exc).__name__,
                    exc,
                )
            self._read_failing = True
            return StreamBatch(retained=False)
        if self._read_failing:
            self._read_failing = False
            logger.warning("run streams: Redis answers reads again")
        return batch

    async def _read(self, run_id: str, after: str | None, *, wait: float) -> StreamBatch:
        key = self.key(run_id)
        position = position_of(after)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.xrange(key, "-", "+", count=1)
            pipe.xrevrange(key, "+", "-", count=1)
            first, last = await pipe.execute()
        if not first:
            return StreamBatch(retained=False)
        first_seq = int(first[0][0].partition("-")[0])
        last_event = _entry(last[0])
        missed = None
        if position is None or position < first_seq - 1:
            missed = Missed(after, str(first_seq - 1))
            position = first_seq - 1
        if position >= int(last_event.id):
            if last_event.event == END_EVENT:
                return StreamBatch(missed=missed, ended=True)
            if wait <= 0 or missed is not None:
                return StreamBatch(missed=missed)
            count = self._count(run_id)
            found = await self._redis.xread({key: f"{position}-0"}, count=count, block=max(1, int(wait * 1000)))
            return StreamBatch(self._cut(run_id, [_entry(raw) for _, entries in found or () for raw in entries]))
        entries = await self._redis.xrange(key, f"({position}-0", "+", count=self._count(run_id))
        return StreamBatch(self._cut(run_id, [_entry(raw) for raw in entries]), missed)

    def _count(self, run_id: str) -> int:
        """Entries to ask Redis for: :data:`MAX_BATCH`, fewer once the run's events were seen
        to be large, so a read fetches about four times ``MAX_BATCH_BYTES``, not 256 events of
        a megabyte each (Redis cannot cut a read by size)."""
        largest = self._event_bytes.get(run_id, 0)
        return max(1, min(MAX_BATCH, 4 * MAX_BATCH_BYTES // largest)) if largest else MAX_BATCH

    def _cut(self, run_id: str, events: list[StreamEvent]) -> tuple[StreamEvent, ...]:
        if events:
            largest = max(len(event.data) for event in events)
            if largest > self._event_bytes.get(run_id, 0):
                if len(self._event_bytes) >= 10_000:  # forget old runs now and then
                    self._event_bytes.clear()
                self._event_bytes[run_id] = largest
        return tuple(cut_by_size(events))

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._redis.aclose()
