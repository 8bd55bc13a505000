"""An SSE response writes an event larger than ``PIECE_CHARS`` in pieces sliced from the
shared text, never framed whole per reader (issue 54 row 1): every chunk it yields stays
under 64 KiB whatever the events' size, and the bytes on the wire are exactly the frames
the small-event path writes."""

from __future__ import annotations

import json
from types import SimpleNamespace

from deerflow_ext.gateway.sse import PIECE_CHARS, frame, run_events
from deerflow_ext.runtime.stream import MemoryStreamBridge


async def test_large_events_go_out_in_pieces_and_read_back_whole() -> None:
    bridge = MemoryStreamBridge()
    writer = bridge.writer("r")
    published = [
        ("metadata", {"run_id": "r"}),
        ("values", {"messages": ["é✓" * 150_000]}),  # non-ASCII: pieces cut by characters
        ("updates", {"n": 1}),
        ("values", {"messages": ["x" * (PIECE_CHARS + 1)]}),
        ("debug", {"skip": True}),
    ]
    for event, data in published:
        await writer.publish(event, data)
    await writer.close({"status": "success"})
    runtime = SimpleNamespace(runs=SimpleNamespace(streams=bridge))
    chunks = [c async for c in run_events(runtime, "t", "r", modes={"values", "updates"}, heartbeat=5)]  # type: ignore[arg-type]
    assert max(map(len, chunks)) <= 64 * 1024 + 64
    kept = [(i, e, d) for i, (e, d) in enumerate([*published, ("end", {"status": "success"})], 1) if e != "debug"]
    want = b"".join(frame(e, json.dumps(d, ensure_ascii=False, separators=(",", ":")), str(i)) for i, e, d in kept)
    assert b"".join(chunks) == want
