"""A run's retained events in memory, most of them compressed.

Why: a streamed reply is one event per token, and each event's JSON repeats the message's
metadata (node, step, run and thread ids, model): ~0.9 KB a token, ~190 KB for a 200-token
reply, kept while the run streams and for the retention time after it, for every open
stream. Readers follow the newest events (a live SSE response reads what was just
published); older ones are read only when a client resumes or joins late. So the log keeps
its newest events as they are and seals each older block of :data:`BLOCK` events into one
zlib-compressed string: the repetition that makes token events large is what compresses.

Sequence numbers (the SSE ids) are the log's: 1, 2, 3... in publishing order. Trimming to the
retained count drops whole sealed blocks, oldest first.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass

__all__ = ["BLOCK", "RunLog", "StreamEvent"]

BLOCK = 32
"""Events per sealed block: the uncompressed tail holds fewer than twice this many."""

_RECORD = "\x1e"  # between events in a sealed block
_FIELD = "\x1f"  # between an event's name and its data
# Neither can occur in an event: names are the host's own, and JSON text escapes every
# control character.


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One published event; ``data`` is its JSON text, encoded once at publish time, and
    ``id`` its sequence number as the SSE id."""

    id: str
    event: str
    data: str


def _seal(events: list[StreamEvent]) -> bytes:
    text = _RECORD.join(f"{e.event}{_FIELD}{e.data}" for e in events)
    return zlib.compress(text.encode(), 1)


def _unseal(block: bytes, first: int) -> list[StreamEvent]:
    records = zlib.decompress(block).decode().split(_RECORD)
    return [StreamEvent(str(first + i), *record.split(_FIELD, 1)) for i, record in enumerate(records)]


class RunLog:
    """One run's events: sealed blocks, then the newest events as they are."""

    __slots__ = ("_blocks", "_tail", "changed", "ended", "first_seq", "limit", "next_seq")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.first_seq = 1  # the oldest retained event's number
        self.next_seq = 1
        self._blocks: list[bytes] = []
        self._tail: list[StreamEvent] = []
        self.changed = asyncio.Event()
        self.ended = False

    def append(self, event: str, data: str) -> None:
        self._tail.append(StreamEvent(str(self.next_seq), event, data))
        self.next_seq += 1
        if len(self._tail) >= 2 * BLOCK:
            self._blocks.append(_seal(self._tail[:BLOCK]))
            del self._tail[:BLOCK]
        excess = self.next_seq - self.first_seq - self.limit
        if excess >= max(self.limit // 4, 1):  # trimmed now and then, not on every event
            while self._blocks and excess >= BLOCK:
                del self._blocks[0]
                self.first_seq += BLOCK
                excess -= BLOCK
            if not self._blocks and excess > 0:
                del self._tail[:excess]
                self.first_seq += excess

    def since(self, position: int, count: int) -> list[StreamEvent]:
        """Up to ``count`` events after sequence number ``position`` (``first_seq - 1`` or later)."""
        tail_first = self.next_seq - len(self._tail)
        if position + 1 >= tail_first:
            start = position + 1 - tail_first
            return self._tail[start : start + count]
        index, skip = divmod(position + 1 - self.first_seq, BLOCK)
        found: list[StreamEvent] = []
        while len(found) < count + skip and index < len(self._blocks):
            found += _unseal(self._blocks[index], self.first_seq + index * BLOCK)
            index += 1
        if len(found) < count + skip:
            found += self._tail
        return found[skip : skip + count]
