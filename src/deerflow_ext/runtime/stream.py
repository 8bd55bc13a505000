"""The stream bridge: one run's events fanned out to every SSE subscriber.

Events are kept for the run's lifetime and replayed to a subscriber that attaches late, so
a client that subscribes right after creating the run still sees ``metadata`` first. A
subscriber that goes away costs nothing: publishing never waits on a reader.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

__all__ = ["END_EVENT", "RunStream", "StreamEvent"]

END_EVENT = "end"


@dataclass(frozen=True)
class StreamEvent:
    event: str
    data: Any


class RunStream:
    """A publish-once, replayable, multi-subscriber event stream for one run."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._history: list[StreamEvent] = []
        self._subscribers: list[asyncio.Queue[StreamEvent]] = []
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def history(self) -> tuple[StreamEvent, ...]:
        return tuple(self._history)

    def publish(self, event: str, data: Any = None) -> None:
        if self._closed:
            return
        item = StreamEvent(event, data)
        self._history.append(item)
        for queue in self._subscribers:
            queue.put_nowait(item)
        if event == END_EVENT:
            self._closed = True

    def close(self, data: Any = None) -> None:
        """Publish the ``end`` event (once); later publishes are ignored."""
        self.publish(END_EVENT, data)

    async def subscribe(self) -> AsyncIterator[StreamEvent]:
        """Every event of the run, from the first, ending with ``end``."""
        queue: asyncio.Queue[StreamEvent] = asyncio.Queue()
        for item in self._history:
            queue.put_nowait(item)
        if not self._closed:
            self._subscribers.append(queue)
        try:
            while True:
                item = await queue.get()
                yield item
                if item.event == END_EVENT:
                    return
        finally:
            if queue in self._subscribers:
                self._subscribers.remove(queue)
