"""A run's retained events in memory, nearly all of them compressed.

Why: a streamed reply is one event per token, and each event's JSON repeats the message's
metadata (node, step, run and thread ids, model): ~0.9 KB a token, ~190 KB for a 200-token
reply, kept while the run streams and for the retention time after it, for every open
stream. Readers follow the newest events (a live SSE response reads what was just
published); older ones are read only when a client resumes or joins late. So the log keeps
only its :data:`LIVE` newest events as they are and seals each older block of :data:`BLOCK`
events into one zlib-compressed string; once the run ended, nothing is left as it is.

Blocks are small so that little waits uncompressed, and each is compressed against the same
preset dictionary, one event of the run's own (the newest one when the first block is
sealed): the metadata that makes token events large is then already in the dictionary, and
an 8-event block of tokens seals into ~100 bytes (measured: 808-byte token events, 2,484
bytes for 192 of them; plain zlib of 32-event blocks took 4,220).

Sequence numbers (the SSE ids) are the log's: 1, 2, 3... in publishing order. Every sealed
block holds :data:`BLOCK` events but the last one sealed at the end; trimming to the
retained count drops whole sealed blocks, oldest first.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass

__all__ = ["BLOCK", "LIVE", "RunLog", "StreamEvent"]

BLOCK = 8
"""Events per sealed block."""
LIVE = 4
"""Newest events a streaming run keeps as they are, for readers right behind the writer: the
uncompressed tail holds from this many to ``LIVE + BLOCK - 1``."""
_WBITS = 13  # an 8 KiB window spans the dictionary and a block of token events
_MEM_LEVEL = 6  # a quarter of zlib's default state: sealing a block costs ~7 us, not ~30

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


def _record(event: StreamEvent) -> str:
    return f"{event.event}{_FIELD}{event.data}"


def _seal(events: list[StreamEvent], dictionary: bytes) -> bytes:
    sealer = zlib.compressobj(1, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zdict=dictionary)
    return sealer.compress(_RECORD.join(map(_record, events)).encode()) + sealer.flush()


def _unseal(block: bytes, first: int, dictionary: bytes) -> list[StreamEvent]:
    records = zlib.decompressobj(_WBITS, zdict=dictionary).decompress(block).decode().split(_RECORD)
    return [StreamEvent(str(first + i), *record.split(_FIELD, 1)) for i, record in enumerate(records)]


class RunLog:
    """One run's events: sealed blocks, then the newest events as they are."""

    __slots__ = ("_blocks", "_dictionary", "_tail", "changed", "ended", "first_seq", "limit", "next_seq")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.first_seq = 1  # the oldest retained event's number
        self.next_seq = 1
        self._blocks: list[bytes] = []
        self._tail: list[StreamEvent] = []
        self._dictionary = b""
        self.changed = asyncio.Event()
        self.ended = False

    def _seal_oldest(self) -> None:
        if not self._dictionary:
            self._dictionary = _record(self._tail[-1]).encode()
        self._blocks.append(_seal(self._tail[:BLOCK], self._dictionary))
        del self._tail[:BLOCK]

    def append(self, event: str, data: str) -> None:
        self._tail.append(StreamEvent(str(self.next_seq), event, data))
        self.next_seq += 1
        if len(self._tail) >= LIVE + BLOCK:
            self._seal_oldest()
        excess = self.next_seq - self.first_seq - self.limit
        if excess >= max(self.limit // 4, 1):  # trimmed now and then, not on every event
            while self._blocks and excess >= BLOCK:
                del self._blocks[0]
                self.first_seq += BLOCK
                excess -= BLOCK
            if not self._blocks and excess > 0:
                del self._tail[:excess]
                self.first_seq += excess

    def end(self) -> None:
        """Nothing more will be appended: seal the rest, so an ended stream kept for resume
        holds compressed blocks only."""
        self.ended = True
        while self._tail:
            self._seal_oldest()

    def since(self, position: int, count: int) -> list[StreamEvent]:
        """Up to ``count`` events after sequence number ``position`` (``first_seq - 1`` or later)."""
        tail_first = self.next_seq - len(self._tail)
        if position + 1 >= tail_first:
            start = position + 1 - tail_first
            return self._tail[start : start + count]
        index, skip = divmod(position + 1 - self.first_seq, BLOCK)
        found: list[StreamEvent] = []
        while len(found) < count + skip and index < len(self._blocks):
            found += _unseal(self._blocks[index], self.first_seq + index * BLOCK, self._dictionary)
            index += 1
        if len(found) < count + skip:
            found += self._tail
        return found[skip : skip + count]
