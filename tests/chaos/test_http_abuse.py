"""Raw HTTP abuse against ``deerflow-ext serve``'s uvicorn: idle connections, slowloris heads,
pipelined garbage and a body sent a byte a second, while a client keeps polling ``/health``.

Each is bounded by a timeout the Gateway sets (docs/RELIABILITY.md): the request-head
deadline (``DEERFLOW_HTTP_HEADER_TIMEOUT_SECONDS``, 2 s here) closes idle and slowloris
connections, keep-alive (``DEERFLOW_HTTP_KEEPALIVE_SECONDS``) closes idle ones after a
response, the body deadline (``gateway.limits.body_timeout_seconds``, 3 s here) answers a
dribbled body 408, and a malformed request is answered 400 and its connection closed.
Held: every abusive connection is closed by the server, ``/health`` answered every poll
throughout, and the process's sockets come back to where they were (its files may not: under
load the SQLite pool may open a second connection, its file and WAL, and keep it).
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import httpx
import pytest
from chaos_support import (
    Gateway,
    figure,
    gateways,
    load_average,
    percentile,
    proc_fds,
    proc_sockets,
    scaled,
    write_config,
)

pytestmark = pytest.mark.e2e

IDLE = scaled(500, 10_000)
SLOWLORIS = scaled(50, 1000)
HEAD_SECONDS = 2.0
BODY_SECONDS = 3.0
KEEPALIVE_SECONDS = 1.0


async def _connect(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return sock


async def _closed_by_server(sock: socket.socket, within: float) -> bytes | None:
    """Everything the server sent until it closed the connection; None if it did not."""
    loop = asyncio.get_running_loop()
    data = bytearray()
    try:
        async with asyncio.timeout(within):
            while chunk := await loop.sock_recv(sock, 65536):
                data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return bytes(data)


async def _idle(port: int) -> bytes | None:
    return await _closed_by_server(await _connect(port), HEAD_SECONDS + 20)


async def _slowloris(port: int) -> bytes | None:
    sock = await _connect(port)
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(sock, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")

    async def dribble() -> None:
        for i in range(60):
            await asyncio.sleep(0.5)
            await loop.sock_sendall(sock, f"X-Slow-{i}: y\r\n".encode())

    feeder = asyncio.create_task(dribble())
    try:
        return await _closed_by_server(sock, HEAD_SECONDS + 20)
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)


async def _pipelined_garbage(port: int) -> bytes | None:
    sock = await _connect(port)
    good = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    await asyncio.get_running_loop().sock_sendall(sock, good + b"\x16\x03\x01\x00\xa5garbage\r\n\r\n" + good)
    return await _closed_by_server(sock, 20)


async def _slow_body(port: int) -> bytes | None:
    sock = await _connect(port)
    loop = asyncio.get_running_loop()
    head = (
        b"POST /api/threads HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
    )
    await loop.sock_sendall(sock, head)

    async def dribble() -> None:
        for _ in range(200):
            await asyncio.sleep(0.5)
            await loop.sock_sendall(sock, b" ")

    feeder = asyncio.create_task(dribble())
    try:
        return await _closed_by_server(sock, BODY_SECONDS + 20)
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)


async def _kept_alive(port: int) -> bytes | None:
    """One good request, then silence: closed after keep-alive."""
    sock = await _connect(port)
    await asyncio.get_running_loop().sock_sendall(sock, b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return await _closed_by_server(sock, KEEPALIVE_SECONDS + HEAD_SECONDS + 20)


async def test_raw_http_abuse_is_bounded_by_timeouts(tmp_path: Path) -> None:
    write_config(tmp_path, gateway={"limits": {"body_timeout_seconds": BODY_SECONDS}})
    env = {
        "DEERFLOW_HTTP_HEADER_TIMEOUT_SECONDS": str(HEAD_SECONDS),
        "DEERFLOW_HTTP_KEEPALIVE_SECONDS": str(KEEPALIVE_SECONDS),
    }
    with gateways() as started:
        gw = Gateway(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}", env)
        started.append(gw.start())
        # /health opens the database (SQLite: the file, its -wal and -shm) on first use.
        async with httpx.AsyncClient(base_url=gw.url) as client:
            assert (await client.get("/health")).status_code == 200
        base_fds, base_sockets = proc_fds(gw.pid), proc_sockets(gw.pid)
        latencies: list[float] = []
        failures: list[str] = []
        stop = asyncio.Event()

        async def poll_health() -> None:
            async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
                while not stop.is_set():
                    began = time.monotonic()
                    try:
                        response = await client.get("/health")
                        if response.status_code != 200:
                            failures.append(str(response.status_code))
                    except httpx.HTTPError as exc:
                        failures.append(type(exc).__name__)
                    latencies.append(time.monotonic() - began)
                    await asyncio.sleep(0.1)

        poller = asyncio.create_task(poll_health())
        idle: list[asyncio.Task[bytes | None]] = []
        for i in range(IDLE):  # opened in batches: the listen backlog is finite
            idle.append(asyncio.create_task(_idle(gw.port)))
            if i % 200 == 199:
                await asyncio.sleep(0.05)
        slow = [asyncio.create_task(_slowloris(gw.port)) for _ in range(SLOWLORIS)]
        garbage = await _pipelined_garbage(gw.port)
        body = await _slow_body(gw.port)
        kept = await _kept_alive(gw.port)
        idle_results = await asyncio.gather(*idle)
        slow_results = await asyncio.gather(*slow)
        stop.set()
        await poller
        for _ in range(100):
            if proc_sockets(gw.pid) <= base_sockets + 1:
                break
            await asyncio.sleep(0.1)
        after_fds, after_sockets = proc_fds(gw.pid), proc_sockets(gw.pid)
        async with httpx.AsyncClient(base_url=gw.url) as client:
            assert (await client.get("/health")).status_code == 200

    assert all(result is not None for result in idle_results), "an idle connection was never closed"
    assert all(result is not None and b"200 OK" not in result for result in slow_results), "slowloris was served"
    # httptools parses the pipelined bytes at once: the garbage is found before the first
    # request is served, and the connection is answered 400 and closed.
    assert garbage is not None and b"400 Bad Request" in garbage, garbage
    assert body is not None and body.startswith(b"HTTP/1.1 408"), body
    assert kept is not None and kept.startswith(b"HTTP/1.1 200"), kept
    assert not failures, failures[:5]
    assert after_sockets <= base_sockets + 1, (base_sockets, after_sockets)
    figure(
        "http_abuse",
        idle_connections=IDLE,
        slowloris=SLOWLORIS,
        pipelined_garbage=1,
        slow_body=1,
        closed_by_server=IDLE + SLOWLORIS + 3,
        health_polls=len(latencies),
        health_failures=0,
        health_p99_ms=round(percentile(latencies, 0.99) * 1000),
        fds=f"{base_fds}->{after_fds}",
        sockets=f"{base_sockets}->{after_sockets}",
        lost=0,
        load=load_average(),
    )
