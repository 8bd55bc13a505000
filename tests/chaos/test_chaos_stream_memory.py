"""Issue 54 rows 1 and 5 at their own sizes, against one ``deerflow-ext serve`` (SQLite,
in-memory bridge, default retention settings).

* Stalled readers: a run's state holds one 1 MiB incompressible message (a 1000 KiB
  message, under ``max_message_bytes``), which nearly every ``values``/``updates``/``debug``/
  ``events`` event repeats; 100 clients join its stream and never read. Before: 9.4 GB of
  RSS and ``/ok`` unanswered for over a minute. Held: RSS grows by at most the documented
  640 KiB a reader (plus allocator slack), ``/ok`` keeps answering, and a reader that does
  read gets the whole stream afterwards.
* Retained bytes: five runs with such a message each. Before: +100 MiB a run for the
  10-minute retention window. Held: what stays is within the per-run budget
  (``DEERFLOW_STREAM_RETAIN_MIB``, 16) per run plus the runs' other memory, and a reader from
  the start of the first run is told ``not_retained`` first.

The readers' count, the message size and the budgets scale down for CI (40 readers,
400 KiB, 4 MiB a run and 12 per process).
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import time
from pathlib import Path

import httpx
import pytest
from chaos_support import Gateway, figure, gateways, load_average, parse_sse, proc_rss_kib, scaled, write_config

pytestmark = pytest.mark.e2e

READERS = scaled(40, 100)
KIB = scaled(400, 1000)
RUNS = 5
MODES = ["values", "updates", "debug", "events"]
PER_READER_KIB = 640
# Full size: the defaults (16 MiB a run, 256 per process). CI size: smaller budgets, so the
# smaller messages still pass them.
RUN_MIB, TOTAL_MIB = scaled(4, 16), scaled(12, 256)


def _incompressible(kib: int) -> str:
    return base64.b64encode(os.urandom(kib * 768)).decode()


async def _stalled(port: int, path: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    return sock


async def _run(client: httpx.AsyncClient, content: str) -> tuple[str, str]:
    thread_id = (await client.post("/api/threads", json={})).json()["thread_id"]
    body = {"input": {"messages": [{"role": "user", "content": content}]}, "stream_mode": MODES}
    response = await client.post(f"/api/threads/{thread_id}/runs/wait", json=body)
    assert response.status_code == 200, response.text[:300]
    return thread_id, (await client.get(f"/api/threads/{thread_id}/runs")).json()[0]["run_id"]


async def test_stream_memory_is_bounded_in_bytes(tmp_path: Path) -> None:
    write_config(tmp_path)
    with gateways() as started:
        env = {"DEERFLOW_STREAM_RETAIN_MIB": str(RUN_MIB), "DEERFLOW_STREAM_RETAIN_TOTAL_MIB": str(TOTAL_MIB)}
        gw = Gateway(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}", env)
        started.append(gw.start())
        async with httpx.AsyncClient(base_url=gw.url, timeout=120) as client:
            await _run(client, "warm up")
            worst_ok, polls, stop = 0.0, 0, asyncio.Event()
            peak = base = proc_rss_kib(gw.pid)

            async def poll() -> None:
                nonlocal worst_ok, polls, peak
                while not stop.is_set():
                    started_at = time.monotonic()
                    assert (await client.get("/ok")).status_code == 200
                    worst_ok = max(worst_ok, time.monotonic() - started_at)
                    peak = max(peak, proc_rss_kib(gw.pid))
                    polls += 1
                    await asyncio.sleep(0.1)

            poller = asyncio.create_task(poll())
            try:
                runs = [await _run(client, _incompressible(KIB)) for _ in range(RUNS)]
                retained_kib = proc_rss_kib(gw.pid) - base
                thread_id, run_id = runs[-1]
                path = f"/api/threads/{thread_id}/runs/{run_id}/stream"
                before_readers = max(peak, proc_rss_kib(gw.pid))
                socks = [await _stalled(gw.port, path) for _ in range(READERS)]
                await asyncio.sleep(5)
                reader_growth_kib = max(peak, proc_rss_kib(gw.pid)) - before_readers
                whole = parse_sse((await client.get(path)).text)
                for sock in socks:
                    sock.close()
                first = parse_sse((await client.get(f"/api/threads/{runs[0][0]}/runs/{runs[0][1]}/stream")).text)
            finally:
                stop.set()
                await poller
    figure(
        "stream_memory",
        readers=READERS,
        message_kib=KIB,
        runs=RUNS,
        reader_growth_mib=round(reader_growth_kib / 1024, 1),
        per_reader_kib=round(reader_growth_kib / READERS),
        retained_growth_mib=round(retained_kib / 1024, 1),
        retain_mib=f"{RUN_MIB}/{TOTAL_MIB}",
        ok_worst_ms=round(worst_ok * 1000),
        ok_polls=polls,
        load=load_average(),
    )
    assert whole[-1][0] == "end"
    assert first[0][0] == "not_retained" and first[-1][0] == "end"
    assert reader_growth_kib < READERS * PER_READER_KIB + 32 * 1024
    assert retained_kib < min(RUNS * RUN_MIB, TOTAL_MIB) * 1024 + 48 * 1024
    assert worst_ok < 5
