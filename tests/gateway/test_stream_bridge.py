"""The in-memory stream bridge: ids, replay after a cursor, bounded retention, expiry.

The same behaviour is asked of the Redis bridge in ``tests/scaleout/test_redis_streams.py``.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from deerflow_ext.runtime.stream import IDLE, MemoryStreamBridge, Missed, follow


async def _publish(bridge: MemoryStreamBridge, run_id: str, count: int, *, end: bool = True) -> None:
    writer = bridge.writer(run_id)
    await writer.publish("metadata", {"run_id": run_id})
    for i in range(count):
        await writer.publish("values", {"i": i})
    if end:
        await writer.close({"status": "success"})


async def _all(bridge: MemoryStreamBridge, run_id: str, after: str | None = None) -> list[object]:
    return [item async for item in follow(bridge, run_id, after, heartbeat=0.05) if item is not IDLE]


async def test_ids_are_increasing_and_the_data_is_json_encoded_once() -> None:
    bridge = MemoryStreamBridge()
    await _publish(bridge, "r", 3)
    events = await _all(bridge, "r")
    assert [e.id for e in events] == ["1", "2", "3", "4", "5"]
    assert [e.event for e in events] == ["metadata", "values", "values", "values", "end"]
    assert json.loads(events[2].data) == {"i": 1}


@pytest.mark.parametrize(("cursor", "first"), [(None, "1"), ("", "1"), ("-1", "1"), ("0", "1"), ("2", "3"), ("4", "5")])
async def test_replay_after_a_cursor(cursor: str | None, first: str) -> None:
    bridge = MemoryStreamBridge()
    await _publish(bridge, "r", 3)
    events = await _all(bridge, "r", cursor)
    assert events[0].id == first and events[-1].event == "end"


async def test_a_cursor_at_the_end_yields_nothing_and_stops() -> None:
    bridge = MemoryStreamBridge()
    await _publish(bridge, "r", 1)
    assert await _all(bridge, "r", "3") == []


async def test_a_reader_waits_for_new_events_and_gets_idle_markers() -> None:
    bridge = MemoryStreamBridge()
    writer = bridge.writer("r")
    await writer.publish("metadata", {})
    seen: list[object] = []

    async def read() -> None:
        async for item in follow(bridge, "r", None, heartbeat=0.05):
            seen.append(item)

    reader = asyncio.create_task(read())
    while IDLE not in seen:  # noqa: ASYNC110  (waiting for the reader's first idle marker)
        await asyncio.sleep(0.01)
    await writer.publish("values", {})
    await writer.close()
    await asyncio.wait_for(reader, 2)
    assert [s.event for s in seen if s is not IDLE] == ["metadata", "values", "end"]


async def test_retention_is_bounded_and_a_reader_is_told_what_it_missed() -> None:
    bridge = MemoryStreamBridge(retain_events=8)
    await _publish(bridge, "r", 30)  # 32 events
    events = await _all(bridge, "r", "1")
    missed, *rest = events
    assert isinstance(missed, Missed) and missed.after == "1"
    first = int(rest[0].id)
    assert missed.resume_after == str(first - 1) and first > 2
    assert [int(e.id) for e in rest] == list(range(first, 33))
    assert 8 <= len(rest) <= 10  # trimmed in chunks: at least the last 8
    # a cursor inside what is kept misses nothing
    assert not any(isinstance(e, Missed) for e in await _all(bridge, "r", str(first)))


async def test_an_unknown_cursor_is_reported_then_everything_kept_follows() -> None:
    bridge = MemoryStreamBridge()
    await _publish(bridge, "r", 2)
    missed, *rest = await _all(bridge, "r", "1700000000000-0")
    assert isinstance(missed, Missed) and missed.resume_after == "0"
    assert [e.id for e in rest] == ["1", "2", "3", "4"]


async def test_an_ended_stream_expires_and_an_unknown_run_is_not_retained() -> None:
    bridge = MemoryStreamBridge(retain_seconds=0.05)
    await _publish(bridge, "r", 1)
    assert (await bridge.read("r", None)).retained
    await asyncio.sleep(0.15)
    assert not (await bridge.read("r", None)).retained
    assert not (await bridge.read("never", None)).retained
    await bridge.aclose()


async def test_publishing_after_the_end_is_ignored() -> None:
    bridge = MemoryStreamBridge()
    writer = bridge.writer("r")
    await writer.close({"status": "success"})
    await writer.publish("values", {})
    await writer.close()
    assert [e.event for e in await _all(bridge, "r")] == ["end"]
