"""The Redis stream bridge under many streams and failing writes (issue 54, row 16).

Against the local Redis, under a key prefix of the test's own. A process's connections do
not grow with its streams; a write Redis refuses is retried, and one given up reaches its
readers as a ``not_retained`` gap, never silently; the log says so once per outage.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio

from deerflow_ext.runtime.redis_stream import RedisStreamBridge
from deerflow_ext.runtime.stream import IDLE, Missed, StreamEvent, follow
from redis_support import REDIS_URL

STREAMS = 150  # past redis-py's default pool of 100: one blocked XREAD each was the failure
EVENTS = 20


@pytest.fixture
async def raw(redis_prefix: str) -> AsyncIterator[Any]:
    client = redis.asyncio.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    await client.aclose()


async def _follow(bridge: RedisStreamBridge, run_id: str) -> list[Any]:
    return [item async for item in follow(bridge, run_id, None, heartbeat=1.0) if item is not IDLE]


async def test_many_waiting_readers_share_a_few_connections(redis_prefix: str, raw: Any) -> None:
    name = f"dfx-{uuid.uuid4().hex[:10]}"
    bridge = RedisStreamBridge(f"{REDIS_URL}?client_name={name}", prefix=redis_prefix)
    most = 0

    async def count() -> None:
        nonlocal most
        while True:
            clients = await raw.client_list()
            most = max(most, sum(c.get("name") == name for c in clients))
            await asyncio.sleep(0.05)

    counter = asyncio.create_task(count())
    try:
        async with asyncio.timeout(60):
            writers = [bridge.writer(f"r{n}") for n in range(STREAMS)]
            for n, writer in enumerate(writers):
                await writer.publish("metadata", {"n": n})
            readers = [asyncio.create_task(_follow(bridge, f"r{n}")) for n in range(STREAMS)]

            async def write(n: int) -> None:
                for i in range(EVENTS):
                    await writers[n].publish("values", i)
                    await asyncio.sleep(0.005)
                await writers[n].close({"status": "success"})

            await asyncio.gather(*(write(n) for n in range(STREAMS)))
            seen = await asyncio.gather(*readers)
    finally:
        counter.cancel()
        await bridge.aclose()
    for items in seen:
        assert all(isinstance(item, StreamEvent) for item in items), [
            i for i in items if not isinstance(i, StreamEvent)
        ]
        assert [int(item.id) for item in items] == list(range(1, EVENTS + 3))
        assert items[-1].event == "end"
    # The pool (16) plus the writer's and the readers' wait connection, whatever the streams.
    assert 0 < most <= 18, most


async def _break_writes(raw: Any, key: str) -> None:
    """Writes to ``key`` fail (WRONGTYPE) until :func:`_restore`; what it holds is kept aside."""
    await raw.rename(key, f"{key}:aside")
    await raw.set(key, "not a stream")


async def _restore(raw: Any, key: str) -> None:
    await raw.delete(key)
    await raw.rename(f"{key}:aside", key)


async def test_refused_writes_are_retried_and_one_outage_is_two_log_lines(
    redis_prefix: str, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bridge = RedisStreamBridge(REDIS_URL, prefix=redis_prefix, write_retry_seconds=30)
    runs = [f"r{n}" for n in range(20)]
    try:
        writers = [bridge.writer(run) for run in runs]
        for writer in writers:
            await writer.publish("metadata", {})
        for run in runs:
            await _break_writes(raw, bridge.key(run))
        with caplog.at_level(logging.WARNING, logger="deerflow_ext.runtime"):
            for writer in writers:
                for i in range(5):
                    await writer.publish("values", i)
            await asyncio.sleep(0.5)  # several attempts fail meanwhile
            for run in runs:
                await _restore(raw, bridge.key(run))
            await asyncio.gather(*(writer.close({"status": "success"}) for writer in writers))
            streams = await asyncio.gather(*(_follow(bridge, run) for run in runs))
    finally:
        await bridge.aclose()
    for items in streams:
        assert [item.id for item in items] == [str(n) for n in range(1, 8)]
    lines = [r.getMessage() for r in caplog.records if r.name == "deerflow_ext.runtime"]
    assert len(lines) == 2, lines
    assert "Redis write failed (ResponseError: WRONGTYPE" in lines[0]
    assert "succeeds again (0 stream event(s) given up meanwhile)" in lines[1]


async def test_writes_given_up_reach_readers_as_a_gap_not_silently(
    redis_prefix: str, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bridge = RedisStreamBridge(REDIS_URL, prefix=redis_prefix, write_retry_seconds=0.2)
    try:
        writer = bridge.writer("r")
        await writer.publish("metadata", {})
        await _break_writes(raw, bridge.key("r"))
        for i in range(3):
            await writer.publish("values", i)  # events 2-4: refused until given up
        await asyncio.sleep(1.0)
        await _restore(raw, bridge.key("r"))
        await writer.publish("values", 3)
        await writer.close({"status": "success"})
        items = await _follow(bridge, "r")
        # A reader that had event 1 and waits for more (the usual case) is told too.
        resumed = await bridge.read("r", "1", wait=0.5)
    finally:
        await bridge.aclose()
    assert [getattr(item, "id", item) for item in items] == ["1", Missed("1", "4"), "5", "6"]
    assert resumed.missed == Missed("1", "4") and [e.id for e in resumed.events] == ["5", "6"]
    assert any("3 stream event(s) given up" in r.getMessage() for r in caplog.records)
