"""Slow and hostile stream readers against one ``deerflow-ext serve`` (SQLite, in-memory bridge).

Runs publish ~1 KiB custom events every 20 ms while many clients follow their streams: most
read as fast as they can, a fifth read one byte a second for a while (a socket with a tiny
receive buffer), one never reads at all (its socket buffers fill). The stream bridge keeps
``DEERFLOW_STREAM_RETAIN_EVENTS`` events per run (100 here) and a reader holds only a cursor
into them, so a reader that falls behind costs no memory: when it catches up it gets a
``not_retained`` event naming where the stream resumes, then the rest and ``end``. Then
garbage ``Last-Event-ID`` values (letters, huge numbers, negative, another run's id, empty)
are thrown at a finished run's stream: each is answered (never a 5xx), with an explicit
``not_retained`` where the value names nothing retained.

Held: every stream ends with ``end`` (the stalled one is closed by the client); the slow
ones — which drop their connection and resume with ``Last-Event-ID`` once the run has moved
past the retained window — are told ``not_retained`` and never see a gap without it; the
process's RSS stays within a per-stream bound; and after the clients leave its descriptors
and threads are back near where they started. The fast readers' token gaps (p50/p99) are
printed, not asserted.
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from chaos_support import (
    Gateway,
    figure,
    gateways,
    load_average,
    parse_sse,
    percentile,
    proc_fds,
    proc_rss_kib,
    scaled,
    write_config,
)

pytestmark = pytest.mark.e2e

STREAMS = scaled(64, 1000)
SLOW = STREAMS // 5
RUNS = scaled(8, 50)
TICKS = 300  # 20 ms apart: six seconds of ~1 KiB events per run
PAD = 1000
SLOW_SECONDS = scaled(9, 30)
GARBAGE = scaled(1000, 10_000)
RETAIN = 100
# Per stream the Gateway may hold one batch (<= 256 events of ~1.1 KiB) and the transport's
# write buffer (64 KiB high-water mark): a generous bound on what a stream may add to RSS.
PER_STREAM_KIB = 256 * 1.2 + 64 + 64


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


async def _fast_reader(client: httpx.AsyncClient, thread_id: str, run_id: str, gaps: list[float]) -> list[str]:
    names: list[str] = []
    last: float | None = None
    async with client.stream("GET", f"/api/threads/{thread_id}/runs/{run_id}/stream") as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                names.append(line[7:])
                if line == "event: custom":
                    now = time.monotonic()
                    if last is not None:
                        gaps.append(now - last)
                    last = now
    return names


async def _raw_request(port: int, path: str, headers: str = "", rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n"
    await loop.sock_sendall(sock, request.encode())
    return sock


async def _slow_reader(client: httpx.AsyncClient, port: int, thread_id: str, run_id: str) -> list[Any]:
    """One byte a second for ``SLOW_SECONDS`` on a socket with a tiny receive buffer, then
    drop the connection and come back with ``Last-Event-ID`` (what an SSE client does)."""
    path = f"/api/threads/{thread_id}/runs/{run_id}/stream"
    sock = await _raw_request(port, path, rcvbuf=2048)
    loop = asyncio.get_running_loop()
    try:
        head = bytearray()
        for _ in range(SLOW_SECONDS):
            head += await loop.sock_recv(sock, 1)
            await asyncio.sleep(1)
    finally:
        sock.close()
    seen = [int(n) for n in re.findall(rb"\nid: (\d+)\n", bytes(head))]
    last = str(max(seen, default=1))
    response = await client.get(path, headers={"Last-Event-ID": last})
    assert response.status_code == 200, response.text[:300]
    return parse_sse(response.text)


def _garbage_ids(other_run_id: str) -> list[str | bytes]:
    fixed = ["abc", "-1", "-99999999999", "0", "", "1e9", "9" * 4000, "1.5", "0x10", other_run_id, "1-0", "1_0"]
    rng = random.Random(7)
    values: list[str | bytes] = ["٣".encode(), "\u00e9t\u00e9".encode("latin-1")]
    for i in range(GARBAGE):
        if i < len(fixed):
            values.append(fixed[i])
        else:
            values.append(
                str(rng.choice([rng.randint(-(10**30), 10**30), rng.randint(0, 2000), "x" * rng.randint(1, 300)]))
            )
    return values


def _gaps_are_announced(events: list[tuple[str, str, Any]]) -> bool:
    """Event ids only ever grow by one, except right after a ``not_retained`` event whose id
    is where the stream resumes; True when there was such an event."""
    told, previous = False, None
    for name, event_id, data in events:
        if name == "not_retained":
            told, previous = True, int(data["resume_after"])
            continue
        if name == "end" or not event_id.isdigit():
            continue
        if previous is not None:
            assert int(event_id) == previous + 1, f"silent gap: {previous} -> {event_id}"
        previous = int(event_id)
    return told


async def test_slow_and_hostile_readers(tmp_path: Path) -> None:
    write_config(tmp_path)
    env = {"DEERFLOW_STREAM_RETAIN_EVENTS": str(RETAIN), "DEERFLOW_SSE_HEARTBEAT_SECONDS": "1"}
    with gateways() as started:
        gw = Gateway(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}", env)
        started.append(gw.start())
        limits = httpx.Limits(max_connections=STREAMS + 32, max_keepalive_connections=32)
        async with httpx.AsyncClient(base_url=gw.url, timeout=120, limits=limits) as client:
            # Warm up (first run builds the agent), then measure from here.
            warm = (await client.post("/api/threads", json={})).json()["thread_id"]
            await client.post(
                f"/api/threads/{warm}/runs/wait", json={"input": {"messages": [{"role": "user", "content": "hi"}]}}
            )
            base_rss, base_fds, base_threads = proc_rss_kib(gw.pid), proc_fds(gw.pid), _threads(gw.pid)

            runs = []
            for i in range(RUNS):
                thread_id = (await client.post("/api/threads", json={})).json()["thread_id"]
                created = await client.post(
                    f"/api/threads/{thread_id}/runs",
                    json={
                        "input": {"messages": [{"role": "user", "content": f"slow:2 tick:{TICKS}:20:{PAD} run {i}"}]},
                        "stream_mode": ["custom"],
                    },
                )
                runs.append((thread_id, created.json()["run_id"]))
            gaps: list[float] = []
            fast = [asyncio.create_task(_fast_reader(client, *runs[i % RUNS], gaps)) for i in range(STREAMS - SLOW - 1)]
            slow = [asyncio.create_task(_slow_reader(client, gw.port, *runs[i % RUNS])) for i in range(SLOW)]
            stalled = await _raw_request(gw.port, f"/api/threads/{runs[0][0]}/runs/{runs[0][1]}/stream", rcvbuf=2048)
            peak = base_rss
            while not all(t.done() for t in fast + slow):
                peak = max(peak, proc_rss_kib(gw.pid))
                await asyncio.sleep(0.25)
            fast_names = [t.result() for t in fast]
            slow_events = [t.result() for t in slow]
            stalled.close()

            # Garbage cursors, against a finished run's retained stream.
            thread_id, run_id = runs[1]
            statuses: dict[int, int] = {}
            not_retained = 0
            gate = asyncio.Semaphore(16)

            async def garbage(value: str | bytes) -> None:
                nonlocal not_retained
                async with gate:
                    response = await client.get(
                        f"/api/threads/{thread_id}/runs/{run_id}/stream", headers={"Last-Event-ID": value}
                    )
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code == 200:
                    events = parse_sse(response.text)
                    assert events and events[-1][0] == "end", (value[:40], response.text[:300])
                    not_retained += _gaps_are_announced(events)

            await asyncio.gather(*(garbage(v) for v in _garbage_ids(runs[2][1])))
            peak = max(peak, proc_rss_kib(gw.pid))

        # Descriptors and threads come back once the clients are gone (no leaked task holds one).
        def settled() -> bool:
            return proc_fds(gw.pid) <= base_fds + 4 and _threads(gw.pid) <= base_threads + 4

        for _ in range(100):
            if settled():
                break
            await asyncio.sleep(0.1)
        after_fds, after_threads, after_rss = proc_fds(gw.pid), _threads(gw.pid), proc_rss_kib(gw.pid)

    assert all(names and names[-1] == "end" for names in fast_names)
    told = 0
    for events in slow_events:
        assert events[-1][0] == "end", [name for name, _, _ in events][-5:]
        told += _gaps_are_announced(events)
    assert told, "no slow reader fell behind the retained window: the case did not test it"
    assert set(statuses) <= {200, 400, 422}, statuses
    assert statuses.get(200, 0) > 0
    growth_kib = peak - base_rss
    bound_kib = STREAMS * PER_STREAM_KIB + 128 * 1024
    assert growth_kib < bound_kib, f"RSS grew {growth_kib} KiB with {STREAMS} streams (bound {bound_kib} KiB)"
    assert after_fds <= base_fds + 4, (base_fds, after_fds)
    assert after_threads <= base_threads + 4, (base_threads, after_threads)
    figure(
        "streams",
        runs=RUNS,
        streams=STREAMS,
        slow=SLOW,
        stalled=1,
        garbage_ids=GARBAGE,
        garbage_statuses=dict(sorted(statuses.items())),
        slow_told_not_retained=told,
        garbage_told_not_retained=not_retained,
        rss_growth_mib=round(growth_kib / 1024, 1),
        rss_bound_mib=round(bound_kib / 1024),
        rss_after_mib=round(after_rss / 1024),
        gap_p50_ms=round(percentile(gaps, 0.5) * 1000, 1),
        gap_p99_ms=round(percentile(gaps, 0.99) * 1000, 1),
        fds=f"{base_fds}->{after_fds}",
        lost=0,
        load=load_average(),
    )
