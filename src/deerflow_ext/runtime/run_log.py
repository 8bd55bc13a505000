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

Bounded in bytes too (issue 54): ``size`` counts the sealed blocks' bytes and the tail's JSON
text, and a log over ``max_bytes`` drops its oldest events (whole sealed blocks, then tail
events) — never its newest event, so a stream keeps its ``end``. A state holding a 1 MiB
incompressible message is repeated in nearly every ``values``/``updates``/``debug``/``events``
event, which the event count alone let grow to ~100 MiB a run.

Reads are cut by size (:data:`MAX_BATCH_BYTES`, from sealed blocks at the end of the block
the cut falls in) as well as by count, and an event of at
least :data:`SHARED_MIN` bytes read from a sealed block is the same object for every reader
(a weak table of the log's large events): readers that stop reading in the middle of one
pin one copy of it between them, not one each.
"""

from __future__ import annotations

import asyncio
import weakref
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BLOCK", "LIVE", "MAX_BATCH_BYTES", "SHARED_MIN", "RunLog", "StreamEvent", "cut_by_size"]

BLOCK = 8
"""Events per sealed block."""
LIVE = 4
"""Newest events a streaming run keeps as they are, for readers right behind the writer: the
uncompressed tail holds from this many to ``LIVE + BLOCK - 1``."""
MAX_BATCH_BYTES = 64 * 1024
"""A read returns events until their JSON text reaches this many bytes (at least one event):
what one SSE response holds of its own at a time, whatever the events' size."""
SHARED_MIN = 16 * 1024
"""Events this large, read from a sealed block, are shared by every reader of the log."""
_WBITS = 13  # an 8 KiB window spans the dictionary and a block of token events
_MEM_LEVEL = 6  # a quarter of zlib's default state: sealing a block costs ~7 us, not ~30

_RECORD = "\x1e"  # between events in a sealed block
_FIELD = "\x1f"  # between an event's name and its data
# Neither can occur in an event: names are the host's own, and JSON text escapes every
# control character.


@dataclass(frozen=True, slots=True, weakref_slot=True)
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


def cut_by_size(events: Sequence[StreamEvent], max_bytes: int = MAX_BATCH_BYTES) -> Sequence[StreamEvent]:
    """The first of ``events`` up to the one whose data reaches ``max_bytes`` in all
    (at least one): a batch a reader holds is bounded in bytes, not only in events."""
    total = 0
    for i, event in enumerate(events):
        total += len(event.data)
        if total >= max_bytes:
            return events[: i + 1]
    return events


def _unseal(block: bytes, first: int, dictionary: bytes) -> tuple[list[StreamEvent], int]:
    """The block's events, and the length of their text (what a read counts against its
    byte cut, without a pass over the events)."""
    text = zlib.decompressobj(_WBITS, zdict=dictionary).decompress(block).decode()
    records = text.split(_RECORD)
    return [StreamEvent(str(first + i), *record.split(_FIELD, 1)) for i, record in enumerate(records)], len(text)


class RunLog:
    """One run's events: sealed blocks, then the newest events as they are."""

    __slots__ = (
        "_blocks",
        "_dictionary",
        "_shared",
        "_tail",
        "changed",
        "ended",
        "first_seq",
        "limit",
        "max_bytes",
        "next_seq",
        "size",
    )

    def __init__(self, limit: int, max_bytes: int | None = None) -> None:
        self.limit = limit
        self.max_bytes = max_bytes  # None: bounded by ``limit`` events only
        self.first_seq = 1  # the oldest retained event's number
        self.next_seq = 1
        self.size = 0  # sealed blocks' bytes + the tail's JSON text
        self._blocks: list[bytes] = []
        self._tail: list[StreamEvent] = []
        self._dictionary = b""
        self._shared: weakref.WeakValueDictionary[int, StreamEvent] | None = None
        self.changed = asyncio.Event()
        self.ended = False

    def _share(self, events: list[StreamEvent]) -> list[StreamEvent]:
        """``events`` with each large one replaced by the copy a reader already holds, if any
        (and remembered for the next reader otherwise)."""
        for i, event in enumerate(events):
            if len(event.data) >= SHARED_MIN:
                if self._shared is None:
                    self._shared = weakref.WeakValueDictionary()
                seq = int(event.id)
                held = self._shared.get(seq)
                if held is None:
                    self._shared[seq] = event
                else:
                    events[i] = held
        return events

    def _seal_oldest(self) -> None:
        if not self._dictionary:
            self._dictionary = _record(self._tail[-1]).encode()
        sealed = self._tail[:BLOCK]
        block = _seal(sealed, self._dictionary)
        self._blocks.append(block)
        del self._tail[:BLOCK]
        self.size += len(block) - sum(len(event.data) for event in sealed)
        self._share(sealed)  # a reader may still hold one of them: the next one shares it

    def append(self, event: str, data: str) -> None:
        self._tail.append(StreamEvent(str(self.next_seq), event, data))
        self.next_seq += 1
        self.size += len(data)
        if len(self._tail) >= LIVE + BLOCK:
            self._seal_oldest()
        excess = self.next_seq - self.first_seq - self.limit
        if excess >= max(self.limit // 4, 1):  # trimmed now and then, not on every event
            while self._blocks and excess >= BLOCK:
                self._drop_block()
                excess -= BLOCK
            if not self._blocks and excess > 0:
                self._drop_tail(excess)
        if self.max_bytes is not None and self.size > self.max_bytes:
            self.trim(self.max_bytes)

    def _drop_block(self) -> None:
        self.size -= len(self._blocks[0])
        del self._blocks[0]
        self.first_seq += BLOCK

    def _drop_tail(self, count: int) -> None:
        self.size -= sum(len(event.data) for event in self._tail[:count])
        del self._tail[:count]
        self.first_seq += count

    def trim(self, max_bytes: int) -> int:
        """Drop the oldest events until ``size`` is at most ``max_bytes`` or only the newest
        event is left; the bytes freed."""
        before = self.size
        # Every block but the last sealed at the end holds BLOCK events, so the first block
        # is a whole one whenever another block or a tail follows it.
        while self.size > max_bytes and self._blocks and (len(self._blocks) > 1 or self._tail):
            self._drop_block()
        if self.size > max_bytes and not self._blocks and len(self._tail) > 1:
            # Oldest first, while over the budget, leaving the newest.
            drop = 0
            size = self.size
            while size > max_bytes and drop < len(self._tail) - 1:
                size -= len(self._tail[drop].data)
                drop += 1
            self._drop_tail(drop)
        if self.size > max_bytes and len(self._blocks) == 1 and not self._tail:
            events, _ = _unseal(self._blocks[0], self.first_seq, self._dictionary)
            if len(events) > 1:  # keep the end alone
                block = _seal(events[-1:], self._dictionary)
                self.size += len(block) - len(self._blocks[0])
                self._blocks[0] = block
                self.first_seq = int(events[-1].id)
        return before - self.size

    def end(self) -> None:
        """Nothing more will be appended: seal the rest, so an ended stream kept for resume
        holds compressed blocks only."""
        self.ended = True
        while self._tail:
            self._seal_oldest()

    def since(self, position: int, count: int, max_bytes: int = MAX_BATCH_BYTES) -> Sequence[StreamEvent]:
        """Up to ``count`` events after sequence number ``position`` (``first_seq - 1`` or
        later), cut once their data reaches ``max_bytes`` (:func:`cut_by_size`) — from sealed
        blocks, at the end of the block where it did: the next read starts at a block's
        first event instead of decompressing that block again."""
        tail_first = self.next_seq - len(self._tail)
        if position + 1 >= tail_first:
            start = position + 1 - tail_first
            return cut_by_size(self._tail[start : start + count], max_bytes)
        index, skip = divmod(position + 1 - self.first_seq, BLOCK)
        found: list[StreamEvent] = []
        size = largest = 0
        while len(found) < count + skip and index < len(self._blocks) and size < max_bytes:
            events, length = _unseal(self._blocks[index], self.first_seq + index * BLOCK, self._dictionary)
            size += length  # the skipped events count too: the cut is by block here
            largest = max(largest, length)
            found += events
            index += 1
        if len(found) < count + skip and size < max_bytes:
            found += cut_by_size(self._tail, max_bytes - size)
        batch = found[skip : skip + count]
        return self._share(batch) if largest >= SHARED_MIN else batch  # no large event otherwise
