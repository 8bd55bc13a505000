"""Server-sent events for run streams: framing, resume, keep-alive, and the end of a stream.

Every event goes out as ``event:``, ``data:`` (one line of JSON) and ``id:``; a client
that reconnects with ``Last-Event-ID`` gets exactly the events after that id (see
``runtime.stream``). Where the bridge no longer keeps what the client asked for, the client
gets an explicit ``not_retained`` event first — its id is the point the stream resumes
from — and never a silent gap. A comment line (``: heartbeat``) goes out after
``heartbeat`` seconds of silence, so proxies keep the connection and clients can tell a
quiet run from a dead socket.

A stream normally ends with the run's own ``end`` event. If that never comes — the process
running it died, or the stream's retention ran out — the run's persisted status decides:
once it is final (on two consecutive heartbeats, so a run still finalizing is not cut
short) the response ends with an ``end`` event of its own. While the database cannot be
asked, the stream keeps its heartbeats and asks again.

A reader that stops reading holds a bounded number of bytes (issue 54). uvicorn waits for a
connection's transport buffer to drain below its high-water mark (64 KiB) before each write,
so what a stalled response holds of its own is the chunk being written and the batch it came
from: batches stop at ``run_log.MAX_BATCH_BYTES`` (64 KiB of data), and an event larger than
:data:`PIECE_CHARS` is written in pieces sliced from the one text every reader shares, never
framed whole per reader. Before, a batch of up to 256 events — each carrying a 1 MiB message
the state held — was joined into one chunk per reader: 100 stalled readers held 9.4 GB.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from typing import Any

from ..persistence.models import RunStatus
from ..runtime.stream import END_EVENT, IDLE, Missed, StreamEvent, follow_batches
from ..runtime.stream_modes import mode_of_event
from .errors import database_unavailable
from .state import GatewayRuntime
from .streaming import ListeningStreamingResponse

__all__ = [
    "HEARTBEAT",
    "NOT_RETAINED_EVENT",
    "PIECE_CHARS",
    "SSE_HEADERS",
    "frame",
    "run_events",
    "sse_response",
]

NOT_RETAINED_EVENT = "not_retained"
HEARTBEAT = b": heartbeat\n\n"
PIECE_CHARS = 16 * 1024
"""An event's data longer than this is written in pieces of this many characters (at most
64 KiB of UTF-8 each)."""
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_LIVE = (RunStatus.PENDING.value, RunStatus.RUNNING.value)


def frame(event: str, data: str, event_id: str) -> bytes:
    """One SSE event; ``data`` is JSON text (it never contains a raw newline)."""
    return f"event: {event}\ndata: {data}\nid: {event_id}\n\n".encode()


def _frame_of(item: StreamEvent) -> bytes:
    return frame(item.event, item.data, item.id)


def _chunks(events: tuple[StreamEvent, ...], modes: Collection[str] | None) -> Iterator[bytes]:
    """The SSE text of ``events`` (those ``modes`` wants): small events joined into one chunk,
    an event over :data:`PIECE_CHARS` in pieces of its shared data."""
    small: list[bytes] = []
    for e in events:
        if not _wanted(e, modes):
            continue
        if len(e.data) <= PIECE_CHARS:
            small.append(_frame_of(e))
            continue
        if small:
            yield b"".join(small)
            small = []
        yield f"event: {e.event}\ndata: ".encode()
        for start in range(0, len(e.data), PIECE_CHARS):
            yield e.data[start : start + PIECE_CHARS].encode()
        yield f"\nid: {e.id}\n\n".encode()
    if small:
        yield b"".join(small)


def _wanted(event: StreamEvent, modes: Collection[str] | None) -> bool:
    return modes is None or (mode := mode_of_event(event.event)) is None or mode in modes


def _not_retained(run_id: str, after: str | None, resume_after: str, message: str) -> bytes:
    data = {"run_id": run_id, "last_event_id": after, "resume_after": resume_after, "message": message}
    return frame(NOT_RETAINED_EVENT, json.dumps(data), resume_after)


async def _final(runtime: GatewayRuntime, thread_id: str, run_id: str) -> dict[str, Any] | None:
    """The run's final status, or None while it is live — or while the database cannot say:
    a stream outlives a database restart (heartbeats go on) instead of being cut mid-body."""
    try:
        record = await runtime.store.get_run(thread_id, run_id)
    except Exception as exc:
        if database_unavailable(exc) is None:
            raise
        return None
    if record is None or record.status in _LIVE:
        return None
    return {"run_id": run_id, "status": record.status, "outcome": record.outcome}


async def run_events(
    runtime: GatewayRuntime,
    thread_id: str,
    run_id: str,
    *,
    after: str | None = None,
    modes: Collection[str] | None = None,
    heartbeat: float,
    on_disconnect: Callable[[], None] | None = None,
) -> AsyncIterator[bytes]:
    """The SSE body of one run's stream from cursor ``after``; ``modes`` filters events by
    API stream mode (None: everything the run streams). ``on_disconnect`` is called when
    the client goes away before the end (it must not await: the request is being torn down).
    """
    bridge = runtime.runs.streams
    cursor = after
    finished_on_idle = 0
    sent_end = False
    try:
        while not sent_end:
            gone = True
            async for item in follow_batches(bridge, run_id, cursor, heartbeat=heartbeat):
                gone = False
                if item is IDLE:
                    final = await _final(runtime, thread_id, run_id)
                    finished_on_idle = finished_on_idle + 1 if final else 0
                    if finished_on_idle >= 2:  # final in the database, and no end is coming
                        yield frame(END_EVENT, json.dumps(final), cursor or "0")
                        sent_end = True
                        return
                    yield HEARTBEAT
                    continue
                finished_on_idle = 0
                if isinstance(item, Missed):
                    cursor = item.resume_after
                    yield _not_retained(
                        run_id,
                        item.after,
                        item.resume_after,
                        f"events after id {item.after} are no longer retained; "
                        f"the stream continues after id {item.resume_after}",
                    )
                    continue
                cursor = item[-1].id
                sent_end = item[-1].event == END_EVENT
                if all(len(e.data) <= PIECE_CHARS for e in item):
                    chunk = b"".join(_frame_of(e) for e in item if _wanted(e, modes))
                    if chunk:
                        yield chunk
                else:
                    for chunk in _chunks(item, modes):
                        yield chunk
            if sent_end:
                return
            # The bridge keeps nothing (more) for this run.
            final = await _final(runtime, thread_id, run_id)
            if final is not None:
                resume = cursor or "0"
                yield _not_retained(
                    run_id,
                    after,
                    resume,
                    f"the stream of run {run_id} is no longer retained; read the thread's state for its result",
                )
                yield frame(END_EVENT, json.dumps(final), resume)
                sent_end = True
                return
            if not gone:
                continue
            # Live but not (yet) in the bridge: another process's run on a shared bridge
            # that has not published, or one whose stream was lost. Wait and look again.
            yield HEARTBEAT
            await asyncio.sleep(min(heartbeat, 1.0))
    finally:
        if not sent_end and on_disconnect is not None:
            on_disconnect()


def sse_response(body: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> ListeningStreamingResponse:
    return ListeningStreamingResponse(body, media_type="text/event-stream", headers={**SSE_HEADERS, **(headers or {})})
