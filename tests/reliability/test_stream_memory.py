"""Run streams are bounded in bytes (issue 54, rows 1 and 5), against a real ``deerflow-ext
serve`` (uvicorn, SQLite, the in-memory bridge): its RSS read from ``/proc/<pid>/status`` and
a concurrent ``/ok`` poller's latency.

* Row 1: clients that join a run's stream and never read, while the run's state holds one
  large message that nearly every ``values``/``updates``/``debug``/``events`` event repeats.
  Before, each reader's response joined a batch of up to 256 such events into one chunk of
  its own (~13 MiB a reader here; 100 readers of a 1 MiB message took 9.4 GB); now a reader
  holds a few hundred KiB whatever the events' size.
* Row 5: five runs, each with a large incompressible message, kept for the retention window.
  Before, only the number of events was bounded (10,000): ~12 MiB a run here, ~100 MiB a run
  at 1 MiB. Now ``DEERFLOW_STREAM_RETAIN_MIB`` / ``DEERFLOW_STREAM_RETAIN_TOTAL_MIB`` bound
  them, and a client asking for a dropped event is told ``not_retained`` first.

Sizes are small so the file takes seconds; ``tests/chaos`` has none of this at scale.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from conftest import GatewayProcess, parse_sse, start_gateway_process, write_config

MODES = ["values", "updates", "debug", "events"]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def _incompressible(kib: int) -> str:
    return base64.b64encode(os.urandom(kib * 768)).decode()  # kib KiB of base64 text


@asynccontextmanager
async def _watching(client: httpx.AsyncClient, pid: int) -> AsyncIterator[dict[str, float]]:
    """While the block runs: the server's peak RSS (KiB) and the slowest ``/ok`` (seconds)."""
    seen = {"peak_kib": float(_rss_kib(pid)), "worst_ok": 0.0, "polls": 0.0}
    stop = asyncio.Event()

    async def poll() -> None:
        while not stop.is_set():
            started = time.monotonic()
            response = await client.get("/ok", timeout=60)
            assert response.status_code == 200
            seen["worst_ok"] = max(seen["worst_ok"], time.monotonic() - started)
            seen["peak_kib"] = max(seen["peak_kib"], _rss_kib(pid))
            seen["polls"] += 1
            await asyncio.sleep(0.05)

    task = asyncio.create_task(poll())
    try:
        yield seen
    finally:
        stop.set()
        await task
    seen["peak_kib"] = max(seen["peak_kib"], _rss_kib(pid))


async def _stalled_reader(port: int, path: str) -> socket.socket:
    """A client that sends its request and never reads: tiny receive buffer, so the server's
    writes back up at once."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    await loop.sock_sendall(sock, request.encode())
    return sock


def _port(gw: GatewayProcess) -> int:
    return int(gw.url.rsplit(":", 1)[1])


async def _run_to_end(client: httpx.AsyncClient, content: str) -> tuple[str, str]:
    thread_id = (await client.post("/api/threads", json={})).json()["thread_id"]
    body = {"input": {"messages": [{"role": "user", "content": content}]}, "stream_mode": MODES}
    response = await client.post(f"/api/threads/{thread_id}/runs/wait", json=body)
    assert response.status_code == 200, response.text[:300]
    runs = (await client.get(f"/api/threads/{thread_id}/runs")).json()
    return thread_id, runs[0]["run_id"]


async def test_readers_that_never_read_pin_little_each(tmp_path: Path, gateway_processes: list[Any]) -> None:
    readers, kib = 40, 200
    write_config(tmp_path / "config.yaml", [])
    gw = start_gateway_process(tmp_path)
    gateway_processes.append(gw)
    big = _incompressible(kib)
    async with httpx.AsyncClient(base_url=gw.url, timeout=60) as client:
        thread_id, run_id = await _run_to_end(client, big)
        path = f"/api/threads/{thread_id}/runs/{run_id}/stream"
        whole = parse_sse((await client.get(path)).text)  # also warms the path up
        carrying = sum(big in json.dumps(data) for _, data in whole)
        assert carrying >= 20, f"only {carrying} events carry the message: nothing to measure"
        base = _rss_kib(gw.proc.pid)
        async with _watching(client, gw.proc.pid) as seen:
            stalled = [await _stalled_reader(_port(gw), path) for _ in range(readers)]
            await asyncio.sleep(3)
        try:
            # The stalled readers did not stop the stream for anyone else: whole, big events
            # (written in pieces) intact.
            again = parse_sse((await client.get(path)).text)
            assert again == whole
        finally:
            for sock in stalled:
                sock.close()
    growth_kib = seen["peak_kib"] - base
    per_reader_kib = growth_kib / readers
    print(
        f"row 1: {readers} stalled readers of {carrying} events carrying {kib} KiB: "
        f"RSS +{growth_kib / 1024:.1f} MiB ({per_reader_kib:.0f} KiB a reader), "
        f"slowest /ok {seen['worst_ok'] * 1000:.0f} ms over {seen['polls']:.0f} polls"
    )
    # Bound (docs/RELIABILITY.md): ~320 KiB a stalled reader; 1 MiB each plus 16 MiB of
    # slack for the allocator. Before: ~13 MiB a reader.
    assert growth_kib < readers * 1024 + 16 * 1024
    assert seen["worst_ok"] < 5, "the event loop stalled"


async def test_retained_events_are_bounded_in_bytes(tmp_path: Path, gateway_processes: list[Any]) -> None:
    runs, kib = 5, 400
    write_config(tmp_path / "config.yaml", [])
    env = {"DEERFLOW_STREAM_RETAIN_MIB": "2", "DEERFLOW_STREAM_RETAIN_TOTAL_MIB": "6"}
    gw = start_gateway_process(tmp_path, extra_env=env)
    gateway_processes.append(gw)
    async with httpx.AsyncClient(base_url=gw.url, timeout=60) as client:
        await _run_to_end(client, "warm up")
        base = _rss_kib(gw.proc.pid)
        async with _watching(client, gw.proc.pid) as seen:
            done = [await _run_to_end(client, _incompressible(kib)) for _ in range(runs)]
        held_kib = _rss_kib(gw.proc.pid) - base
        # The oldest run's oldest events went first: a reader from the start is told so
        # before what is left, and the stream still ends with ``end``.
        thread_id, run_id = done[0]
        events = parse_sse((await client.get(f"/api/threads/{thread_id}/runs/{run_id}/stream")).text)
        assert events[0][0] == "not_retained", [name for name, _ in events][:5]
        assert events[0][1]["last_event_id"] is None and int(events[0][1]["resume_after"]) > 0
        assert events[-1][0] == "end"
        # The newest run keeps its last 2 MiB: more than its final state, less than all.
        thread_id, run_id = done[-1]
        newest = parse_sse((await client.get(f"/api/threads/{thread_id}/runs/{run_id}/stream")).text)
        assert newest[0][0] == "not_retained" and newest[-1][0] == "end"
    print(
        f"row 5: {runs} runs of a {kib} KiB incompressible message: RSS held +{held_kib / 1024:.1f} MiB, "
        f"peak +{(seen['peak_kib'] - base) / 1024:.1f} MiB, slowest /ok {seen['worst_ok'] * 1000:.0f} ms"
    )
    # 6 MiB retained over all runs, plus the runs' other memory and the allocator's slack
    # (~11 MiB measured with 0.1 MiB retained). Before: +73 MiB, ~12 MiB a run kept.
    assert held_kib < 32 * 1024
    assert seen["worst_ok"] < 5, "the event loop stalled"
