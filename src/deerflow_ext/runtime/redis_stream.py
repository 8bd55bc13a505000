"""Run streams in Redis Streams, so any Gateway process can serve any run's stream.

One Redis stream per run, ``<prefix>run:<run_id>:events``, written only by the process
running the run. Entry ids are the run's event sequence numbers (``<n>-0``, set explicitly
by that one writer), so an SSE id is the same ``n`` whichever bridge issued it and the
retention arithmetic is the in-memory bridge's: ``XADD ... MAXLEN ~ retain_events`` trims
the oldest entries, and a cursor below the first retained entry is reported as missed.
A stream expires a day after its last write (a run whose process died never ends it) and
``retain_seconds`` after its ``end``. Retention here is bounded in events only (the byte
budgets are the in-memory bridge's; Redis's ``maxmemory`` bounds the rest), but a read is
cut at ``run_log.MAX_BATCH_BYTES`` like the in-memory bridge's, so a reader holds one
bounded batch, and asks for fewer entries once a run's events were seen to be large.

Publishing does not wait on Redis: events queue in the process and one task writes every
run's queued events in one pipeline per round trip, in order (``redis_writes``; only the
first event and the ``end`` are awaited). A batch Redis does not take is sent again, with a
backoff, for up to ``WRITE_RETRY_SECONDS``; only then is it given up, and never silently:
entry ids are consecutive, so a reader that finds one missing gets a ``not_retained`` marker
for the gap (issue 54: events were dropped with a warning each, and readers saw a normal
``end`` after a gappy stream).

Connections are sized for the streams a process carries, not one per stream: one for the
writes, one for every reader's wait for new entries (the process's one blocking ``XREAD``,
``redis_tail``), and a blocking pool of ``max_connections`` (``DEERFLOW_REDIS_MAX_CONNECTIONS``)
for the readers' reads, one round trip each, that queues a read when all are busy instead of
failing it as redis-py's default pool did past 100 (``Too many connections`` at 64
streaming conversations). A read
that fails (Redis down or restarting) answers "nothing retained" instead of raising, so the
SSE layer decides from the run's persisted status: a finished run's stream ends with
``not_retained`` and ``end``, a live one waits and reads again — and, Redis back, resumes
after a ``not_retained`` for what was lost with it. Without this the response was cut
mid-body.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from .outage_log import OutageLog
from .redis_tail import READ_AGAIN, RawEntry, RedisTail
from .redis_writes import ORPHAN_TTL_SECONDS, WRITE_RETRY_SECONDS, RedisWrites
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

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "ORPHAN_TTL_SECONDS",
    "WRITE_RETRY_SECONDS",
    "RedisStreamBridge",
    "RedisUnavailableError",
]

logger = logging.getLogger("deerflow_ext.runtime")

DEFAULT_MAX_CONNECTIONS = 16
_PENDING_LIMIT = 10_000
# A read waits for a pooled connection as long as it takes (each command is bounded by the
# socket timeout): under a burst, failing it would end a finished run's stream with
# not_retained although its events are all in Redis.
_POOL_WAIT_SECONDS = None


class RedisUnavailableError(RuntimeError):
    """``DEERFLOW_REDIS_URL`` names a Redis this process cannot reach."""


def _entry(raw: RawEntry) -> StreamEvent:
    entry_id, fields = raw
    return StreamEvent(entry_id.partition("-")[0], fields.get("e", ""), fields.get("d", "null"))


def _contiguous(
    raw: Sequence[RawEntry], position: int, after: str | None, missed: Missed | None
) -> tuple[tuple[StreamEvent, ...], Missed | None]:
    """The entries after ``position`` up to the first gap; a gap right after ``position`` (a
    write Redis never took) is reported as missed, as retention is."""
    events = tuple(_entry(entry) for entry in raw)
    if not events:
        return events, missed
    first = int(events[0].id)
    if first > position + 1:
        missed = Missed(after if missed is None else missed.after, str(first - 1))
    for index in range(1, len(events)):
        if int(events[index].id) != first + index:
            return events[:index], missed
    return events, missed


class _RedisWriter:
    def __init__(self, writes: RedisWrites, key: str, run_id: str) -> None:
        self.run_id = run_id
        self._writes = writes
        self._key = key
        self._next = 1
        self._closed = False

    async def publish(self, event: str, data: Any = None) -> None:
        if self._closed:
            return
        self._closed = event == END_EVENT
        seq = self._next
        self._next += 1
        self._writes.append(self._key, (seq, event, dumps(data)))
        # The first event is in Redis before publish returns: the run's id is handed to
        # clients right after it, and a reader must find the stream. The end is, so that a
        # run counts as streamed to its end only once readers can see it.
        if seq == 1 or self._closed or self._writes.pending(self._key) > _PENDING_LIMIT:
            await self._writes.written(self._key, seq)

    async def close(self, data: Any = None) -> None:
        await self.publish(END_EVENT, data)


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
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        write_retry_seconds: float = WRITE_RETRY_SECONDS,
    ) -> None:
        from redis.asyncio import BlockingConnectionPool, Redis

        self.url = url
        self.prefix = prefix
        self.retain_events = retain_events
        self.retain_seconds = retain_seconds
        pool = BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=_POOL_WAIT_SECONDS, decode_responses=True
        )
        self._redis: Any = Redis.from_pool(pool)
        self._tail = RedisTail(url)
        self._writes = RedisWrites(
            url, retain_events=retain_events, retain_seconds=retain_seconds, retry_seconds=write_retry_seconds
        )
        self._read_log = OutageLog(logger, "run streams: Redis read")
        self._event_bytes: dict[str, int] = {}  # per run: the largest event a read has seen

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
        return _RedisWriter(self._writes, self.key(run_id), run_id)

    async def read(self, run_id: str, after: str | None, *, wait: float = 0.0) -> StreamBatch:
        try:
            batch = await self._read(run_id, after, wait=wait)
        except Exception as exc:
            self._read_log.failed(exc, "streams wait for it or end from the runs' status")
            return StreamBatch(retained=False)
        self._read_log.recovered()
        return batch

    async def _read(self, run_id: str, after: str | None, *, wait: float) -> StreamBatch:
        key = self.key(run_id)
        position = position_of(after)
        if position is not None and wait > 0:
            # A reader that follows a live stream reads nothing itself: the tail's XREAD got
            # the entries for every reader of the run. Only a reader the tail cannot serve
            # (joining, behind, or after a quiet heartbeat) reads the stream below.
            held = self._tail.held(key, position)
            if held:
                return self._batch(run_id, *_contiguous(held, position, after, None))
            if held is not None:
                found = await self._tail.wait(key, position, wait, control=self._redis)
                if found:
                    return self._batch(run_id, *_contiguous(found, position, after, None))
                wait = 0.0 if found is None else wait
        start = 0 if position is None else position
        # One round trip: the first and last entries (retention, the end) and what follows.
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.xrange(key, "-", "+", count=1)
            pipe.xrevrange(key, "+", "-", count=1)
            pipe.xrange(key, f"({start}-0", "+", count=self._count(run_id))
            first, last, entries = await pipe.execute()
        if not first:
            return StreamBatch(retained=False)
        first_seq = int(first[0][0].partition("-")[0])
        missed = None
        if position is None or position < first_seq - 1:
            missed = Missed(after, str(first_seq - 1))
            position = first_seq - 1
        if entries:
            return self._batch(run_id, *_contiguous(entries, position, after, missed))
        last_event = _entry(last[0])
        if position >= int(last_event.id) and last_event.event == END_EVENT:
            return StreamBatch(missed=missed, ended=True)
        if wait <= 0 or missed is not None:
            return StreamBatch(missed=missed)
        found = await self._tail.wait(key, position, wait, control=self._redis, newest=int(last_event.id))
        if found is None:
            return StreamBatch()
        if found is READ_AGAIN:
            found = await self._redis.xrange(key, f"({position}-0", "+", count=self._count(run_id))
            if not found:  # the tail saw entries after the cursor; gone since (expired, Redis restarted)
                return StreamBatch(retained=False)
        return self._batch(run_id, *_contiguous(found, position, after, None))

    def _count(self, run_id: str) -> int:
        """Entries to ask Redis for: :data:`MAX_BATCH`, fewer once the run's events were seen
        to be large, so a read fetches about four times ``MAX_BATCH_BYTES``, not 256 events of
        a megabyte each (Redis cannot cut a read by size)."""
        largest = self._event_bytes.get(run_id, 0)
        return max(1, min(MAX_BATCH, 4 * MAX_BATCH_BYTES // largest)) if largest else MAX_BATCH

    def _batch(self, run_id: str, events: tuple[StreamEvent, ...], missed: Missed | None) -> StreamBatch:
        """A batch cut at ``MAX_BATCH_BYTES``, remembering how large the run's events run."""
        if events:
            largest = max(len(event.data) for event in events)
            if largest > self._event_bytes.get(run_id, 0):
                if len(self._event_bytes) >= 10_000:  # forget old runs now and then
                    self._event_bytes.clear()
                self._event_bytes[run_id] = largest
        return StreamBatch(tuple(cut_by_size(events)), missed)

    async def aclose(self) -> None:
        await self._tail.aclose()
        await self._writes.aclose()
        with contextlib.suppress(Exception):
            await self._redis.aclose()
