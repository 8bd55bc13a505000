"""One blocking ``XREAD`` per process for every run stream a reader waits on.

A reader that has caught up with a run's stream waits for its next entries. Each waiting
reader used to block in an ``XREAD`` of its own on a pooled connection, so a process held
one Redis connection per waiting reader: at 64 streaming conversations the pool (100 in
redis-py) ran out and reads and writes failed with ``Too many connections`` (issue 54).

Here one task per process (:class:`RedisTail`) blocks in a single ``XREAD`` over every
stream some reader waits on, on a connection of its own, each stream from the newest entry
the tail has seen. Entries it reads are handed to the readers waiting at that point; a
reader further behind is told to read them itself (a non-blocking ``XRANGE``). A stream a
reader starts waiting on joins the ``XREAD`` at once: the tail's blocked command is ended
with ``CLIENT UNBLOCK`` (sent again until it lands, as the ``XREAD`` may not have reached
Redis yet) and issued again with the new stream. So a process holds one connection for all
its readers' waits, whatever their number.

The tail's connection has no retries of its own: when it fails, every waiting reader gets
the error (the bridge answers "nothing retained" and the SSE layer decides from the run's
status), and the tail reconnects with a backoff capped at one second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .outage_log import OutageLog
from .stream import MAX_BATCH

__all__ = ["READ_AGAIN", "RawEntry", "RedisTail", "entries_of"]

logger = logging.getLogger("deerflow_ext.runtime")

RawEntry = tuple[str, dict[str, str]]

READ_AGAIN: Final = ()
"""What :meth:`RedisTail.wait` answers when there is news the tail cannot hand over: the
reader is behind the tail's last read, so it reads the stream itself."""

_BLOCK_MS = 2_000  # under redis-py's default 5 s socket timeout, with room to spare
_UNBLOCK_TRIES = 50
_MAX_BACKOFF = 1.0
_LINGER = 5.0  # seconds a stream stays in the XREAD with nobody waiting (a reader between waits)


def _seq(entry_id: str) -> int:
    return int(entry_id.partition("-")[0])


def entries_of(found: Any) -> Iterable[tuple[str, Sequence[RawEntry]]]:
    """``(key, entries)`` of an ``XREAD`` answer, in RESP2 (a list) or RESP3 (a map) form."""
    if not found:
        return ()
    if isinstance(found, dict):
        return found.items()
    return ((key, entries) for key, entries in found)


@dataclass(eq=False)
class _Watch:
    """One stream the tail reads: the newest entry it saw, and who waits on it."""

    seen: int
    waiters: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    start: int = 0  # the recent entries read: those after ``start``, consecutive
    entries: Sequence[RawEntry] = ()
    error: BaseException | None = None
    last_wait: float = 0.0


class RedisTail:
    """The process's waits on run streams, multiplexed on one connection."""

    def __init__(self, url: str) -> None:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self._url = url
        # One connection, no retries: a reconnect must be seen here (the client id changes).
        self._redis: Any = Redis.from_url(
            url,
            decode_responses=True,
            single_connection_client=True,
            retry=Retry(NoBackoff(), 0),
            socket_timeout=_BLOCK_MS / 1000 + 5.0,
        )
        self._watched: dict[str, _Watch] = {}
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._client_id: int | None = None
        self._reading: set[str] | None = None  # the keys of the XREAD in flight
        self._unblocking: asyncio.Task[None] | None = None
        self._log = OutageLog(logger, "run streams: the Redis reader connection")

    async def wait(
        self, key: str, position: int, seconds: float, *, control: Any, newest: int | None = None
    ) -> Sequence[RawEntry] | None:
        """The entries after ``position`` once some arrive, within ``seconds``.

        None: nothing arrived in time. :data:`READ_AGAIN`: something did, but not from
        ``position`` on. Raises what the tail's connection raised, if it failed meanwhile.
        ``control`` is a client of the bridge's pool, for ``CLIENT UNBLOCK``; ``newest`` the
        stream's newest entry as the caller read it (a cursor may name one never written).
        """
        watch = self._watched.get(key)
        if watch is None:
            seen = position if newest is None else min(position, newest)
            watch = self._watched[key] = _Watch(seen=seen)
            self._wake(key, control)
        elif watch.seen > position:
            return READ_AGAIN
        watch.waiters += 1
        try:
            async with asyncio.timeout(seconds):
                while True:
                    changed = watch.changed
                    await changed.wait()
                    if watch.error is not None:
                        raise watch.error
                    if watch.seen > position:
                        return self._after(watch, position)
        except TimeoutError:
            return None
        finally:
            # The watch stays a while with nobody waiting: its reader is between two waits
            # (sending what it got), and dropping the stream from the XREAD then adding it
            # back would end the tail's blocked read for every entry.
            watch.waiters -= 1
            watch.last_wait = asyncio.get_running_loop().time()

    def held(self, key: str, position: int) -> Sequence[RawEntry] | None:
        """What the tail already holds after ``position``, without a round trip: its last
        read's entries after it, ``()`` when the reader is at the newest entry the tail saw
        (so it should :meth:`wait`), None when the tail cannot say (the reader reads)."""
        watch = self._watched.get(key)
        if watch is None or watch.error is not None or watch.seen < position:
            return None
        if watch.seen == position:
            return ()
        found = self._after(watch, position)
        return found or None

    @staticmethod
    def _after(watch: _Watch, position: int) -> Sequence[RawEntry]:
        if not watch.start <= position:
            return READ_AGAIN
        return tuple(entry for entry in watch.entries if _seq(entry[0]) > position) or READ_AGAIN

    def _wake(self, key: str, control: Any) -> None:
        """Make the tail read ``key`` too: start it, wake it, or end its blocked ``XREAD``."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="deerflow-redis-tail")
        self._idle.set()
        if self._reading is not None and key not in self._reading and self._unblocking is None:
            self._unblocking = asyncio.get_running_loop().create_task(self._unblock(control))

    def _missing(self) -> bool:
        """An ``XREAD`` is blocked without some stream a reader now waits on."""
        reading = self._reading
        return reading is not None and self._client_id is not None and not self._watched.keys() <= reading

    async def _unblock(self, control: Any) -> None:
        try:
            for _ in range(_UNBLOCK_TRIES):
                if not self._missing():
                    return  # the XREAD ended anyway; the next one has every stream
                if not await control.client_unblock(self._client_id):
                    await asyncio.sleep(0.002)  # sent before the XREAD reached Redis: again
                else:
                    await asyncio.sleep(0)
        except Exception:
            return  # the XREAD ends by itself within its block time
        finally:
            self._unblocking = None

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            if not self._watched:
                self._idle.clear()
                await self._idle.wait()
                continue
            try:
                await self._read_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._fail(exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            else:
                backoff = 0.05
                self._log.recovered()

    async def _read_once(self) -> None:
        if self._client_id is None:
            self._client_id = int(await self._redis.client_id())
        now = asyncio.get_running_loop().time()
        for key in [k for k, w in self._watched.items() if w.waiters == 0 and now - w.last_wait > _LINGER]:
            del self._watched[key]
        if not self._watched:
            return
        streams = {key: f"{watch.seen}-0" for key, watch in self._watched.items()}
        self._reading = set(streams)
        try:
            found = await self._redis.xread(streams, count=MAX_BATCH, block=_BLOCK_MS)
        finally:
            self._reading = None
        for key, entries in entries_of(found):
            watch = self._watched.get(key)
            if watch is None or not entries:
                continue
            start = _seq(streams[key])
            if watch.entries and watch.start < start and _seq(watch.entries[-1][0]) == start:
                # Keep up to MAX_BATCH recent entries, so that a reader a few deliveries
                # behind (its loop was busy sending) is served from here too.
                entries = (*watch.entries, *entries)[-MAX_BATCH:]
                start = _seq(entries[0][0]) - 1
            watch.start, watch.entries = start, entries
            watch.seen = max(watch.seen, _seq(entries[-1][0]))
            watch.error = None
            watch.changed.set()
            watch.changed = asyncio.Event()

    def _fail(self, exc: Exception) -> None:
        self._client_id = None
        self._log.failed(exc, "waiting readers read again")
        for watch in self._watched.values():
            watch.error = exc
            watch.changed.set()
            watch.changed = asyncio.Event()

    async def aclose(self) -> None:
        for task in (self._task, self._unblocking):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        with contextlib.suppress(Exception):
            await self._redis.aclose()
