"""``gateway.limits.body_timeout_seconds``: a request body must arrive in full within the
deadline (408, connection closed), on a real uvicorn; a body that arrives in time is read,
and a streamed response that waits for the client long after its body is not cut short."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from deerflow_ext.gateway.limits import BodySizeLimit
from live_uvicorn import live_server

DEADLINE = 0.5


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    @app.post("/stream")
    async def stream(request: Request) -> StreamingResponse:
        await request.body()

        async def ticks() -> AsyncIterator[bytes]:
            for _ in range(3):
                await asyncio.sleep(DEADLINE)
                yield b"tick\n"

        return StreamingResponse(ticks())

    app.add_middleware(BodySizeLimit, max_body_bytes=1 << 20, body_seconds=DEADLINE)
    return app


@contextlib.asynccontextmanager
async def _server() -> AsyncIterator[int]:
    async with live_server(_app(), lifespan="auto") as live:
        yield int(live.base_url.rsplit(":", 1)[1])


class _Answer(asyncio.Protocol):
    """What the server sent until it closed. A server that closes with part of our body
    unread makes TCP reset the connection, and a stream reader then raises instead of
    returning what had already arrived; here the bytes received before the reset are kept."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.closed: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.received += data

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(bytes(self.received))


async def _post(port: int, path: str, body: bytes, *, byte_every: float | None = None) -> bytes:
    transport, answer = await asyncio.get_running_loop().create_connection(_Answer, "127.0.0.1", port)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    transport.write(head.encode())

    async def feed() -> None:
        for i in range(len(body)):
            if transport.is_closing():
                return
            transport.write(body[i : i + 1])
            await asyncio.sleep(byte_every or 0)

    feeder = asyncio.create_task(feed()) if byte_every else None
    if feeder is None:
        transport.write(body)
    try:
        async with asyncio.timeout(DEADLINE * 20):
            return await answer.closed
    finally:
        if feeder is not None:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
        transport.close()


async def test_a_body_dribbled_past_the_deadline_is_answered_408() -> None:
    async with _server() as port:
        answer = await _post(port, "/echo", b"x" * 100, byte_every=DEADLINE / 4)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"gateway.limits.body_timeout_seconds" in answer


async def test_a_body_in_time_is_read_and_a_long_stream_after_it_is_not_cut() -> None:
    async with _server() as port:
        assert b'{"bytes":100}' in await _post(port, "/echo", b"x" * 100)
        answer = await _post(port, "/stream", b"{}")
    assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"tick") == 3, answer
