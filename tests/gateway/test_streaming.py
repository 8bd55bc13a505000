"""``ListeningStreamingResponse``: starlette's streamed response, its client watched by one task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from deerflow_ext.gateway.streaming import ListeningStreamingResponse

SCOPE: dict[str, Any] = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "method": "GET"}


class Client:
    """An ASGI server's side of one response: what was sent, and a disconnect on demand.
    As uvicorn's, ``receive`` answers ``http.disconnect`` once the response is complete too."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.leave = asyncio.Event()
        self.receives = 0

    async def receive(self) -> dict[str, Any]:
        self.receives += 1
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.leave.set()

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


async def test_a_stream_that_ends_leaves_no_cancellation_behind() -> None:
    client = Client()

    async def body() -> AsyncIterator[bytes]:
        yield b"one "
        await asyncio.sleep(0)
        yield b"two"

    await ListeningStreamingResponse(body())(SCOPE, client.receive, client.send)
    assert client.body() == b"one two" and client.sent[-1]["more_body"] is False
    assert client.receives == 1  # it listened
    await asyncio.sleep(0.01)  # a late listener would cancel this task here
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_the_client_leaving_ends_the_stream_where_it_waits_and_the_response_returns() -> None:
    client = Client()
    closed: list[str] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"first"
            client.leave.set()
            await asyncio.Event().wait()  # a run that never ends
            yield b"never"
        finally:
            closed.append("finally")

    await asyncio.wait_for(ListeningStreamingResponse(body())(SCOPE, client.receive, client.send), 5)
    assert client.body() == b"first" and closed == ["finally"]
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_cancellation_from_outside_still_propagates() -> None:
    client = Client()
    started = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        started.set()
        await asyncio.Event().wait()
        yield b"never"

    serving = asyncio.ensure_future(ListeningStreamingResponse(body())(SCOPE, client.receive, client.send))
    await started.wait()
    serving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await serving


async def test_a_receive_that_fails_ends_the_stream_and_the_response_raises_its_error() -> None:
    client = Client()
    closed: list[str] = []

    async def broken() -> dict[str, Any]:
        await asyncio.sleep(0)
        raise RuntimeError("the server's receive broke")

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"first"
            await asyncio.Event().wait()
            yield b"never"
        finally:
            closed.append("finally")

    with pytest.raises(RuntimeError, match="receive broke"):
        await asyncio.wait_for(ListeningStreamingResponse(body())(SCOPE, broken, client.send), 5)
    assert closed == ["finally"]


async def test_under_asgi_spec_2_4_no_listener_is_started() -> None:
    client = Client()

    async def body() -> AsyncIterator[bytes]:
        yield b"x"

    scope = {**SCOPE, "asgi": {"version": "3.0", "spec_version": "2.4"}}
    await ListeningStreamingResponse(body())(scope, client.receive, client.send)
    assert client.body() == b"x" and client.receives == 0
