"""Every run stream write of a process, in one pipeline per round trip on one connection.

Each run used to flush its own events on a connection of the shared pool, so a process
writing 64 streams competed with its readers for connections and, past redis-py's pool of
100, failed writes with ``Too many connections`` — events were dropped with a warning each
(issue 54). Here one task per process (:class:`RedisWrites`) sends the events every run
queued since its last round trip as one non-transactional pipeline, on a connection of its
own, in each run's order. The more streams a process carries, the bigger the batches, not
the number of connections or round trips.

A write Redis does not take is sent again with a backoff, for up to ``retry_seconds`` of
failing; an entry a failed attempt did write is refused by id on the next one, and that
refusal counts as written (ids are the run's sequence numbers, set here). Only after that are
the events given up, and readers learn of it: ids are consecutive, so a reader that finds
one missing reports a ``not_retained`` gap (``redis_stream``). Logging is per outage, not per
batch or run: one line when writes start failing, one when they succeed again with the
number of events given up meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .outage_log import OutageLog
from .stream import END_EVENT

__all__ = ["ORPHAN_TTL_SECONDS", "WRITE_RETRY_SECONDS", "PendingEvent", "RedisWrites"]

logger = logging.getLogger("deerflow_ext.runtime")

ORPHAN_TTL_SECONDS = 24 * 3600
WRITE_RETRY_SECONDS = 10.0
_WRITTEN_ALREADY = "equal or smaller than the target stream top item"
_MAX_BACKOFF = 1.0

PendingEvent = tuple[int, str, str]
"""``(sequence number, event name, JSON data)`` of one queued event."""


@dataclass(eq=False)
class _Run:
    key: str
    pending: list[PendingEvent] = field(default_factory=list)
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    failing_since: float | None = None
    done_upto: int = 0  # every event up to this one is in Redis, or was given up


class RedisWrites:
    """The process's stream writes; :meth:`append` queues, :meth:`written` waits for one."""

    def __init__(
        self, url: str, *, retain_events: int, retain_seconds: float, retry_seconds: float = WRITE_RETRY_SECONDS
    ) -> None:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self._redis: Any = Redis.from_url(
            url, decode_responses=True, single_connection_client=True, retry=Retry(NoBackoff(), 0)
        )
        self.retain_events = retain_events
        self.retain_seconds = retain_seconds
        self.retry_seconds = retry_seconds
        self._runs: dict[str, _Run] = {}
        self._dirty: dict[str, _Run] = {}  # runs with events to send, in the order they queued
        self._task: asyncio.Task[None] | None = None
        self._log = OutageLog(logger, "run streams: Redis write")
        self._given_up = 0

    def append(self, key: str, event: PendingEvent) -> None:
        """Queue one event of the stream ``key`` (events of a stream in sequence order)."""
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = _Run(key)
        run.pending.append(event)
        self._dirty.setdefault(key, run)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush(), name="deerflow-redis-writes")

    async def written(self, key: str, seq: int) -> None:
        """Return once event ``seq`` of ``key`` is in Redis, or was given up."""
        run = self._runs.get(key)
        if run is None or seq <= run.done_upto:
            return
        waiter = asyncio.get_running_loop().create_future()
        run.waiters.append((seq, waiter))
        await waiter

    def pending(self, key: str) -> int:
        run = self._runs.get(key)
        return 0 if run is None else len(run.pending)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.05
        while self._dirty:
            runs = list(self._dirty.values())
            self._dirty.clear()
            batches = [(run, run.pending) for run in runs]
            for run in runs:
                run.pending = []
            errors = await self._send(batches)
            now = loop.time()
            for run, batch in batches:
                error = errors.get(run.key)
                if error is None:
                    run.failing_since = None
                    self._done(run, batch[-1][0])
                    continue
                self._log.failed(
                    error, f"writes are retried for {self.retry_seconds:.0f} s, then readers are told with not_retained"
                )
                run.failing_since = now if run.failing_since is None else run.failing_since
                if now - run.failing_since < self.retry_seconds:
                    run.pending = batch + run.pending  # sent again first, in order
                    self._dirty[run.key] = run
                else:  # given up: readers see the gap these leave as not_retained
                    self._given_up += len(batch)
                    run.failing_since = None
                    self._done(run, batch[-1][0])
            if errors:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            else:
                backoff = 0.05
                if self._log.failing and self._log.recovered(f"{self._given_up} stream event(s) given up meanwhile"):
                    self._given_up = 0

    async def _send(self, batches: Sequence[tuple[_Run, list[PendingEvent]]]) -> dict[str, BaseException]:
        """One pipeline for every batch; the runs whose writes failed, with the error."""
        counts = []
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for run, batch in batches:
                    for seq, event, data in batch:
                        pipe.xadd(
                            run.key, {"e": event, "d": data}, id=f"{seq}-0", maxlen=self.retain_events, approximate=True
                        )
                    if batch[-1][1] == END_EVENT:
                        pipe.pexpire(run.key, max(1, round(self.retain_seconds * 1000)))
                    else:
                        # Every batch, not only the first: a Redis that restarted empty lost it.
                        pipe.expire(run.key, ORPHAN_TTL_SECONDS)
                    counts.append(len(batch) + 1)
                results = await pipe.execute(raise_on_error=False)
        except Exception as exc:
            return {run.key: exc for run, _ in batches}
        errors: dict[str, BaseException] = {}
        start = 0
        for (run, _), count in zip(batches, counts, strict=True):
            for result in results[start : start + count]:
                if isinstance(result, Exception) and _WRITTEN_ALREADY not in str(result):
                    errors[run.key] = result
                    break
            start += count
        return errors

    def _done(self, run: _Run, upto: int) -> None:
        run.done_upto = max(run.done_upto, upto)
        still = []
        for seq, waiter in run.waiters:
            if seq > upto:
                still.append((seq, waiter))
            elif not waiter.done():
                waiter.set_result(None)
        run.waiters = still
        if not run.pending and not run.waiters and self._runs.get(run.key) is run:
            del self._runs[run.key]

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        with contextlib.suppress(Exception):
            await self._redis.aclose()
