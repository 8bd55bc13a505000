"""SSE overhead of the resumable stream path against the path it replaced, side by side.

Run: ``PYTHONPATH=src python benchmarks/sse.py [--events N] [--rounds R]``. Not a test:
prints figures. With Redis answering on 127.0.0.1:6379 a third arm streams through the
Redis bridge (``DEERFLOW_REDIS_URL``); keys live under a prefix of the run's own and are
deleted at the end.

Both arms serve the same run events over a real uvicorn on loopback to ``K`` httpx clients
reading to the end:

* **old** — the path before resumable streams (commit ``c79eec6^``): the run's events kept
  as Python objects in an unbounded list, one ``asyncio.Queue`` per subscriber, each event
  JSON-encoded *per subscriber* (``event:``/``data:``, no id). Reproduced below as it was.
* **new** — the Gateway's code as it is: ``MemoryStreamBridge`` (encoded once at publish,
  numbered, bounded), read in batches by ``runtime.stream.follow`` and framed by
  ``gateway.sse.run_events`` (``event:``/``data:``/``id:``, heartbeat and resume logic).

The events are what a run publishes: a ``messages`` tuple (an ``AIMessageChunk`` and its
metadata) and a ``values`` state with a growing message list, alternating. Time is from the
first publish until every client has read ``end``; arms alternate within each round, and
the median over rounds is reported, with the ratio new/old per subscriber count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from deerflow_ext.gateway.sse import run_events, sse_response
from deerflow_ext.runtime.stream import MemoryStreamBridge, StreamBridge
from deerflow_ext.runtime.wire import jsonable

REDIS_URL = "redis://127.0.0.1:6379/0"


# ---------------------------------------------------------------------------- the old path


@dataclass(frozen=True)
class _OldEvent:
    event: str
    data: Any


class OldRunStream:
    """``runtime/stream.py`` before resumable streams, as it was."""

    def __init__(self) -> None:
        self._history: list[_OldEvent] = []
        self._subscribers: list[asyncio.Queue[_OldEvent]] = []
        self._closed = False

    def publish(self, event: str, data: Any = None) -> None:
        if self._closed:
            return
        item = _OldEvent(event, data)
        self._history.append(item)
        for queue in self._subscribers:
            queue.put_nowait(item)
        if event == "end":
            self._closed = True

    async def subscribe(self) -> AsyncIterator[_OldEvent]:
        queue: asyncio.Queue[_OldEvent] = asyncio.Queue()
        for item in self._history:
            queue.put_nowait(item)
        if not self._closed:
            self._subscribers.append(queue)
        try:
            while True:
                item = await queue.get()
                yield item
                if item.event == "end":
                    return
        finally:
            if queue in self._subscribers:
                self._subscribers.remove(queue)


def _old_encode(event: str, data: Any) -> bytes:
    payload = json.dumps(jsonable(data), default=str, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {payload}\n\n".encode()


async def _old_frames(stream: OldRunStream) -> AsyncIterator[bytes]:
    async for item in stream.subscribe():
        yield _old_encode(item.event, item.data)


# ---------------------------------------------------------------------------- the run's events


def run_events_to_publish(count: int) -> list[tuple[str, Any]]:
    history: list[Any] = [HumanMessage(content="tell me about deer", id="h1")]
    events: list[tuple[str, Any]] = [("metadata", {"run_id": "r", "thread_id": "t"})]
    for i in range(count // 2):
        chunk = AIMessageChunk(content=f"token {i} ", id="a1")
        events.append(("messages", (chunk, {"langgraph_node": "model", "langgraph_step": 1, "run_id": "r"})))
        history = [*history[-20:], AIMessage(content=f"answer part {i}", id=f"a{i}")]
        events.append(("values", {"messages": history, "title": "Deer"}))
    return events


# ---------------------------------------------------------------------------- the server


@dataclass
class _Runtime:
    """What ``run_events`` reads: the bridge (the store is only read after idle heartbeats)."""

    streams: StreamBridge
    runs: Any = field(init=False)

    def __post_init__(self) -> None:
        self.runs = self


def make_app(old: dict[str, OldRunStream], bridges: Mapping[str, StreamBridge]) -> FastAPI:
    app = FastAPI()

    @app.get("/old/{run_id}")
    async def old_stream(run_id: str) -> StreamingResponse:
        return StreamingResponse(_old_frames(old[run_id]), media_type="text/event-stream")

    @app.get("/new/{bridge}/{run_id}")
    async def new_stream(bridge: str, run_id: str) -> StreamingResponse:
        runtime: Any = _Runtime(bridges[bridge])
        return sse_response(run_events(runtime, "t", run_id, heartbeat=3600.0))

    return app


async def _read_to_end(client: httpx.AsyncClient, path: str) -> int:
    count = 0
    async with client.stream("GET", path) as response:
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                count += 1
                if line == "event: end":
                    break
    return count


async def _measure(
    client: httpx.AsyncClient,
    path: str,
    subscribers: int,
    publish: Callable[[str, Any], Any],
    close: Callable[[], Any],
    events: list[tuple[str, Any]],
) -> float:
    first, *rest = events
    opening = publish(*first)  # the run's metadata exists before anyone joins (as in the Gateway)
    if asyncio.iscoroutine(opening):
        await opening
    readers = [asyncio.create_task(_read_to_end(client, path)) for _ in range(subscribers)]
    await asyncio.sleep(0.05)  # the readers are connected and waiting
    start = time.perf_counter()
    for event, data in rest:
        result = publish(event, data)
        if asyncio.iscoroutine(result):
            await result
        await asyncio.sleep(0)  # a run yields between events
    closing = close()
    if asyncio.iscoroutine(closing):
        await closing
    counts = await asyncio.gather(*readers)
    elapsed = time.perf_counter() - start
    assert all(c == len(events) + 1 for c in counts), (counts, len(events))
    return elapsed


async def main(event_count: int, rounds: int, subscriber_counts: tuple[int, ...]) -> None:
    events = run_events_to_publish(event_count)
    old: dict[str, OldRunStream] = {}
    bridges: dict[str, StreamBridge] = {"memory": MemoryStreamBridge()}
    prefix = f"dfx-bench:{uuid.uuid4().hex[:8]}:"
    try:
        from deerflow_ext.runtime.redis_stream import RedisStreamBridge

        redis_bridge = RedisStreamBridge(REDIS_URL, prefix=prefix)
        await redis_bridge.start()
        bridges["redis"] = redis_bridge
    except Exception as exc:
        print(f"(no Redis arm: {exc})")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(old, bridges), host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110  (uvicorn exposes no event for it)
        await asyncio.sleep(0.01)
    results: dict[tuple[str, int], list[float]] = {}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            for _ in range(rounds):
                for subscribers in subscriber_counts:
                    run = uuid.uuid4().hex
                    old[run] = OldRunStream()
                    results.setdefault(("old", subscribers), []).append(
                        await _measure(
                            client,
                            f"/old/{run}",
                            subscribers,
                            old[run].publish,
                            lambda run=run: old[run].publish("end", {}),
                            events,
                        )
                    )
                    for name, bridge in bridges.items():
                        run = uuid.uuid4().hex
                        writer = bridge.writer(run)
                        results.setdefault((name, subscribers), []).append(
                            await _measure(
                                client,
                                f"/new/{name}/{run}",
                                subscribers,
                                writer.publish,
                                lambda writer=writer: writer.close({}),
                                events,
                            )
                        )
    finally:
        server.should_exit = True
        await serving
        for bridge in bridges.values():
            if hasattr(bridge, "_redis"):
                keys = [k async for k in bridge._redis.scan_iter(match=f"{prefix}*")]
                if keys:
                    await bridge._redis.delete(*keys)
            await bridge.aclose()

    print(f"{len(events) + 1} events per run, {rounds} rounds, median wall time to the last client's end")
    for subscribers in subscriber_counts:
        base = statistics.median(results[("old", subscribers)])
        line = f"K={subscribers:<2} old {base * 1e3:7.1f} ms ({base / (len(events) + 1) * 1e6:5.1f} us/event)"
        for name in bridges:
            value = statistics.median(results[(name, subscribers)])
            per_event = value / (len(events) + 1) * 1e6
            line += f" | new/{name} {value * 1e3:7.1f} ms ({per_event:5.1f} us/event, x{value / base:.2f})"
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.rounds, (1, 4, 16)))
