"""The stream bridge: each run's events, with ids, retained for replay and fanned out.

A run publishes its events once, through a :class:`RunStreamWriter`; any number of readers
follow them by cursor (the id of the last event they saw), which is what makes a dropped
SSE connection resumable: the client sends ``Last-Event-ID`` and gets exactly the events
after it. Publishing never waits on a reader, and a reader holds little of its own: a read
returns at most :data:`MAX_BATCH` events and stops once their data reaches
``run_log.MAX_BATCH_BYTES`` (64 KiB), so a reader that stops reading pins one batch, not
the stream.

Retention is bounded, and a reader is told when it asks for more than is kept: a run keeps
its last ``retain_events`` events (a few more between trims), and once it ended the whole
stream is dropped ``retain_seconds`` later. The in-memory bridge bounds bytes as well: a run
keeps at most ``retain_bytes`` of events and the process ``retain_total_bytes`` over all its
runs (the oldest events of finished runs go first, then those of live runs, oldest run
first). A cursor older than the oldest retained event yields a :class:`Missed` marker
before the retained events — the SSE layer turns it into an explicit ``not_retained``
event, never a silent gap.

Two bridges implement the protocol: :class:`MemoryStreamBridge` (one process; the default)
and ``redis_stream.RedisStreamBridge`` (Redis Streams, so every Gateway process can serve
every run's stream). Both number a run's events 1, 2, 3...: that number is the SSE id.
``"-1"``, ``"0"`` and no cursor at all mean "from the first event" (``useStream`` of
``@langchain/langgraph-sdk`` joins with ``-1``); any other id the bridge did not issue
(``"-999"``, ``"abc"``) is answered ``not_retained``, then the oldest retained event on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from .run_log import MAX_BATCH_BYTES, RunLog, StreamEvent, cut_by_size
from .wire import dumps

__all__ = [
    "DEFAULT_RETAIN_BYTES",
    "DEFAULT_RETAIN_EVENTS",
    "DEFAULT_RETAIN_SECONDS",
    "DEFAULT_RETAIN_TOTAL_BYTES",
    "END_EVENT",
    "IDLE",
    "MAX_BATCH_BYTES",
    "MemoryStreamBridge",
    "Missed",
    "RunStreamWriter",
    "StreamBatch",
    "StreamBridge",
    "StreamEvent",
    "cut_by_size",
    "follow",
    "follow_batches",
    "position_of",
]

END_EVENT = "end"
DEFAULT_RETAIN_EVENTS = 10_000
DEFAULT_RETAIN_SECONDS = 600.0
DEFAULT_RETAIN_BYTES = 16 * 1024 * 1024
DEFAULT_RETAIN_TOTAL_BYTES = 256 * 1024 * 1024
MAX_BATCH = 256


@dataclass(frozen=True, slots=True)
class Missed:
    """The reader's cursor ``after`` is older than what is retained; reading resumes after
    ``resume_after`` (the id just before the oldest retained event)."""

    after: str | None
    resume_after: str


@dataclass(frozen=True, slots=True)
class StreamBatch:
    """What one read returned.

    ``retained`` is False when the bridge keeps nothing for the run (it never streamed
    through this bridge, or its retention ran out); ``ended`` is True when the cursor is at
    or past the stream's ``end``, so nothing more will come.
    """

    events: tuple[StreamEvent, ...] = ()
    missed: Missed | None = None
    retained: bool = True
    ended: bool = False


class RunStreamWriter(Protocol):
    """The publishing side of one run's stream (the run's worker holds it)."""

    run_id: str

    async def publish(self, event: str, data: Any = None) -> None:
        """Append one event; ignored once the stream ended."""
        ...

    async def close(self, data: Any = None) -> None:
        """Publish the ``end`` event (once)."""
        ...


class StreamBridge(Protocol):
    """Where run streams live; ``shared`` bridges serve every Gateway process."""

    shared: bool

    def writer(self, run_id: str) -> RunStreamWriter: ...

    async def read(self, run_id: str, after: str | None, *, wait: float = 0.0) -> StreamBatch:
        """Events after cursor ``after``; waits up to ``wait`` seconds when there are none yet."""
        ...

    async def aclose(self) -> None: ...


IDLE = None
"""What :func:`follow` yields when ``heartbeat`` seconds passed without an event."""


async def follow_batches(
    bridge: StreamBridge, run_id: str, after: str | None, *, heartbeat: float
) -> AsyncIterator[tuple[StreamEvent, ...] | Missed | None]:
    """Every event after ``after`` until ``end``, in the batches the bridge read them in (an
    SSE response writes a batch as one chunk), a :class:`Missed` marker where retention ran
    out, and :data:`IDLE` every ``heartbeat`` seconds of silence (an SSE keep-alive).

    Returns without ``end`` only when the bridge keeps nothing (more) for the run; the
    caller decides what that means from the run's persisted status.
    """
    cursor = after
    while True:
        batch = await bridge.read(run_id, cursor, wait=heartbeat)
        if batch.missed is not None:
            yield batch.missed
            cursor = batch.missed.resume_after
        if batch.events:
            ends = [i for i, event in enumerate(batch.events) if event.event == END_EVENT]
            if ends:
                yield batch.events[: ends[0] + 1]
                return
            yield batch.events
            cursor = batch.events[-1].id
        if batch.ended or not batch.retained:
            return
        if not batch.events and batch.missed is None:
            yield IDLE


async def follow(
    bridge: StreamBridge, run_id: str, after: str | None, *, heartbeat: float
) -> AsyncIterator[StreamEvent | Missed | None]:
    """:func:`follow_batches`, one event at a time."""
    async for item in follow_batches(bridge, run_id, after, heartbeat=heartbeat):
        if isinstance(item, tuple):
            for event in item:
                yield event
        else:
            yield item


# ---------------------------------------------------------------------------- in memory


def position_of(cursor: str | None) -> int | None:
    """The sequence number an event id names (both bridges number a run's events 1, 2, ...);
    0 is "before the first event"; None: not an id either bridge issued.

    Only ASCII decimal digits name a position: ``int`` alone would also read ``"1_0"`` as
    10, ``" 7 "`` as 7 and Arabic-Indic digits as numbers. ``"-1"`` is the one negative
    (what ``useStream`` joins with); any other (``"-999"``) was never issued, so, like any
    other id we did not issue, it names no position: the reader is told ``not_retained``
    and reads from the oldest retained event, rather than silently from the start."""
    if cursor is None or cursor == "" or cursor == "-1":
        return 0
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 20:
        return None
    return int(cursor)


class _MemoryWriter:
    def __init__(self, bridge: MemoryStreamBridge, run_id: str) -> None:
        self.run_id = run_id
        self._bridge = bridge
        self._closed = False

    async def publish(self, event: str, data: Any = None) -> None:
        if self._closed:
            return
        self._closed = event == END_EVENT
        self._bridge.append(self.run_id, event, dumps(data))

    async def close(self, data: Any = None) -> None:
        await self.publish(END_EVENT, data)


class MemoryStreamBridge:
    """Streams of this process's runs, in memory: ids are per-run sequence numbers."""

    shared = False

    def __init__(
        self,
        *,
        retain_events: int = DEFAULT_RETAIN_EVENTS,
        retain_seconds: float = DEFAULT_RETAIN_SECONDS,
        retain_bytes: int = DEFAULT_RETAIN_BYTES,
        retain_total_bytes: int = DEFAULT_RETAIN_TOTAL_BYTES,
    ) -> None:
        if retain_events < 1:
            raise ValueError("retain_events must be at least 1")
        if retain_bytes < 1 or retain_total_bytes < 1:
            raise ValueError("retain_bytes and retain_total_bytes must be at least 1")
        self.retain_events = retain_events
        self.retain_seconds = retain_seconds
        self.retain_bytes = retain_bytes
        self.retain_total_bytes = retain_total_bytes
        self.size = 0  # every log's ``size``
        self._logs: dict[str, RunLog] = {}
        self._expiries: dict[str, asyncio.TimerHandle] = {}

    def writer(self, run_id: str) -> RunStreamWriter:
        old = self._logs.pop(run_id, None)
        if old is not None:
            self.size -= old.size
        self._logs[run_id] = RunLog(self.retain_events, self.retain_bytes)
        return _MemoryWriter(self, run_id)

    def append(self, run_id: str, event: str, data: str) -> None:
        log = self._logs.get(run_id)
        if log is None or log.ended:
            return
        before = log.size
        log.append(event, data)
        if event == END_EVENT:
            log.end()
            self._expire_later(run_id, log)
        self.size += log.size - before
        if self.size > self.retain_total_bytes:
            self._shrink()
        # Wake every reader waiting on this run, then arm a fresh event for the next wait.
        log.changed.set()
        log.changed = asyncio.Event()

    def _shrink(self) -> None:
        """Back under ``retain_total_bytes``: the oldest events of finished runs first, then
        those of live runs, oldest run first; each run keeps at least its newest event."""
        for ended in (True, False):
            for log in [log for log in self._logs.values() if log.ended is ended]:
                excess = self.size - self.retain_total_bytes
                if excess <= 0:
                    return
                self.size -= log.trim(max(log.size - excess, 0))

    def _expire_later(self, run_id: str, log: RunLog) -> None:
        def expire() -> None:
            self._expiries.pop(run_id, None)
            if self._logs.get(run_id) is log:
                del self._logs[run_id]
                self.size -= log.size

        with contextlib.suppress(RuntimeError):  # no running loop: keep it until aclose()
            self._expiries[run_id] = asyncio.get_running_loop().call_later(self.retain_seconds, expire)

    async def read(self, run_id: str, after: str | None, *, wait: float = 0.0) -> StreamBatch:
        log = self._logs.get(run_id)
        if log is None:
            return StreamBatch(retained=False)
        position = position_of(after)
        missed = None
        if position is None or position < log.first_seq - 1:
            missed = Missed(after, str(log.first_seq - 1))
            position = log.first_seq - 1
        if position >= log.next_seq - 1:
            if log.ended:
                return StreamBatch(missed=missed, ended=True)
            if wait <= 0 or missed is not None:
                return StreamBatch(missed=missed)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):  # no extra task per wait, unlike wait_for
                    await log.changed.wait()
            if self._logs.get(run_id) is not log:
                return StreamBatch(retained=False)
            if position < log.first_seq - 1:  # the buffer wrapped while we waited
                missed = Missed(after, str(log.first_seq - 1))
                position = log.first_seq - 1
        return StreamBatch(tuple(log.since(position, MAX_BATCH, MAX_BATCH_BYTES)), missed)

    async def aclose(self) -> None:
        for handle in self._expiries.values():
            handle.cancel()
        self._expiries.clear()
        self._logs.clear()
        self.size = 0
