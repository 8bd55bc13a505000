"""Both stream bridges, one contract: ids, replay after a cursor, bounded retention with an
explicit miss, waiting readers, expiry after the end.

The Redis bridge runs against the local Redis under a prefix of the test's own (skipped,
saying why, when Redis does not answer).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from deerflow_ext.runtime.redis_stream import RedisStreamBridge, RedisUnavailableError
from deerflow_ext.runtime.stream import IDLE, MemoryStreamBridge, Missed, StreamBridge, follow
from redis_support import REDIS_URL

Make = Callable[..., StreamBridge]


@pytest.fixture(params=["memory", "redis"])
async def make(request: pytest.FixtureRequest) -> AsyncIterator[Make]:
    made: list[StreamBridge] = []

    def build(**retention: Any) -> StreamBridge:
        if request.param == "memory":
            bridge: StreamBridge = MemoryStreamBridge(**retention)
        else:
            prefix = request.getfixturevalue("redis_prefix")
            bridge = RedisStreamBridge(REDIS_URL, prefix=prefix, **retention)
        made.append(bridge)
        return bridge

    yield build
    for bridge in made:
        await bridge.aclose()


async def _publish(bridge: StreamBridge, run_id: str, count: int, *, end: bool = True) -> None:
    writer = bridge.writer(run_id)
    await writer.publish("metadata", {"run_id": run_id})
    for i in range(count):
        await writer.publish("values", {"i": i})
    if end:
        await writer.close({"status": "success"})


async def _all(bridge: StreamBridge, run_id: str, after: str | None = None) -> list[Any]:
    return [item async for item in follow(bridge, run_id, after, heartbeat=0.05) if item is not IDLE]


async def test_ids_are_the_event_numbers_and_the_data_is_json(make: Make) -> None:
    bridge = make()
    await _publish(bridge, "r", 3)
    events = await _all(bridge, "r")
    assert [e.id for e in events] == ["1", "2", "3", "4", "5"]
    assert [e.event for e in events] == ["metadata", "values", "values", "values", "end"]
    assert json.loads(events[2].data) == {"i": 1}


@pytest.mark.parametrize(("cursor", "first"), [(None, "1"), ("", "1"), ("-1", "1"), ("0", "1"), ("2", "3"), ("4", "5")])
async def test_replay_after_a_cursor(make: Make, cursor: str | None, first: str) -> None:
    bridge = make()
    await _publish(bridge, "r", 3)
    events = await _all(bridge, "r", cursor)
    assert events[0].id == first and events[-1].event == "end"


async def test_a_cursor_at_the_end_yields_nothing_and_stops(make: Make) -> None:
    bridge = make()
    await _publish(bridge, "r", 1)
    assert await _all(bridge, "r", "3") == []


async def test_a_reader_waits_for_new_events_and_gets_idle_markers(make: Make) -> None:
    bridge = make()
    writer = bridge.writer("r")
    await writer.publish("metadata", {})
    seen: list[Any] = []

    async def read() -> None:
        async for item in follow(bridge, "r", None, heartbeat=0.05):
            seen.append(item)

    reader = asyncio.create_task(read())
    while IDLE not in seen and not reader.done():  # noqa: ASYNC110  (the reader's first idle marker)
        await asyncio.sleep(0.01)
    await writer.publish("values", {})
    await writer.close()
    await asyncio.wait_for(reader, 5)
    assert [s.event for s in seen if s is not IDLE] == ["metadata", "values", "end"]


async def test_retention_is_bounded_and_a_reader_is_told_what_it_missed(make: Make) -> None:
    bridge = make(retain_events=8)
    await _publish(bridge, "r", 300)  # 302 events
    missed, *rest = await _all(bridge, "r", "1")
    assert isinstance(missed, Missed) and missed.after == "1"
    first = int(rest[0].id)
    assert missed.resume_after == str(first - 1) and first > 2
    assert [int(e.id) for e in rest] == list(range(first, 303))
    # At least the last 8; Redis trims whole nodes of its radix tree (~100 entries) at a time.
    assert 8 <= len(rest) <= 8 + 100
    assert not any(isinstance(e, Missed) for e in await _all(bridge, "r", str(first)))


async def test_an_unknown_cursor_is_reported_then_everything_kept_follows(make: Make) -> None:
    bridge = make()
    await _publish(bridge, "r", 2)
    missed, *rest = await _all(bridge, "r", "1700000000000-0")
    assert isinstance(missed, Missed) and missed.resume_after == "0"
    assert [e.id for e in rest] == ["1", "2", "3", "4"]


async def test_an_ended_stream_expires_and_an_unknown_run_is_not_retained(make: Make) -> None:
    bridge = make(retain_seconds=0.1)
    await _publish(bridge, "r", 1)
    assert (await bridge.read("r", None)).retained
    await asyncio.sleep(0.3)
    assert not (await bridge.read("r", None)).retained
    assert not (await bridge.read("never", None)).retained


async def test_publishing_after_the_end_is_ignored(make: Make) -> None:
    bridge = make()
    writer = bridge.writer("r")
    await writer.close({"status": "success"})
    await writer.publish("values", {})
    await writer.close()
    assert [e.event for e in await _all(bridge, "r")] == ["end"]


async def test_an_unreachable_redis_is_named_by_its_variable() -> None:
    bridge = RedisStreamBridge("redis://127.0.0.1:1/0")
    with pytest.raises(
        RedisUnavailableError, match=r"DEERFLOW_REDIS_URL: cannot reach Redis at redis://127\.0\.0\.1:1/0"
    ):
        await bridge.start()
    await bridge.aclose()


async def test_a_batch_is_cut_by_size(make: Make) -> None:
    """A reader holds at most one batch of its own: it stops once the events' data reaches
    64 KiB, whatever their count (both bridges)."""
    bridge = make()
    writer = bridge.writer("big")
    for _ in range(6):
        await writer.publish("values", {"m": "x" * 40_000})
    assert (await bridge.read("big", "5", wait=5)).events  # Redis writes in the background
    batch = await bridge.read("big", None)  # a live run: its newest events
    assert [e.id for e in batch.events] == ["1", "2"]
    await writer.close()
    assert [e.id for e in await _all(bridge, "big")] == [str(i) for i in range(1, 8)]


async def test_the_memory_bridge_bounds_retained_bytes_per_run_and_per_process() -> None:
    """Per run: the oldest events past ``retain_bytes`` are dropped and a reader from the
    start is told (``Missed``) before the rest. Per process: past ``retain_total_bytes``
    finished runs lose their oldest events first, and each run keeps its ``end``."""
    bridge = MemoryStreamBridge(retain_bytes=300_000, retain_total_bytes=500_000)
    payload = {"m": secrets.token_urlsafe(40_000)}  # ~53 KB, nearly incompressible
    for run_id in ("a", "b", "c"):
        await _publish_payload(bridge, run_id, payload, 20)
        assert bridge.size == sum(log.size for log in bridge._logs.values())
        assert bridge._logs[run_id].size <= 300_000
    assert bridge.size <= 500_000
    items = await _all(bridge, "a")
    assert isinstance(items[0], Missed) and items[-1].event == "end"
    assert [e.event for e in (await _all(bridge, "c"))[1:]][-1] == "end"
    await bridge.aclose()
    assert bridge.size == 0


async def _publish_payload(bridge: StreamBridge, run_id: str, payload: Any, count: int) -> None:
    writer = bridge.writer(run_id)
    for _ in range(count):
        await writer.publish("values", payload)
    await writer.close({"status": "success"})


async def test_redis_reads_of_large_events_fetch_few_entries(redis_prefix: str) -> None:
    """Redis cannot cut a read by size: once a run's events were seen to be large, a read
    asks for about four batches' bytes of them, not 256 entries of whatever size."""
    bridge = RedisStreamBridge(REDIS_URL, prefix=redis_prefix)
    try:
        await _publish_payload(bridge, "big", {"m": "x" * 100_000}, 20)
        assert bridge._count("big") == 256  # nothing seen yet
        first = await bridge.read("big", None)
        assert [e.id for e in first.events] == ["1"]
        assert bridge._count("big") == 2
        assert [e.id for e in await _all(bridge, "big")] == [str(i) for i in range(1, 22)]
    finally:
        await bridge.aclose()
