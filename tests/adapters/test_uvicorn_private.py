"""uvicorn's protocol class with a request-head deadline (``adapters/uvicorn_private.py``),
on a real uvicorn: idle and slowloris connections are closed, requests and long streamed
responses are not; and the supervisor of ``serve --workers N``, which tells a SIGINT apart.
Failures name uvicorn's version."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from importlib import metadata
from typing import Any

import pytest

from deerflow_ext.adapters import uvicorn_private
from live_uvicorn import live_server

WHERE = f"uvicorn {metadata.version('uvicorn')}"
DEADLINE = 0.5
KEEP_ALIVE = 1.5


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    if scope["path"] == "/long":  # a streamed response that outlives the deadline
        for _ in range(4):
            await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
            await asyncio.sleep(DEADLINE)
    await send({"type": "http.response.body", "body": b"done\n"})


@contextlib.asynccontextmanager
async def _server() -> AsyncIterator[int]:
    assert uvicorn_private.HeadDeadlineProtocol is not None, f"{WHERE}: the head deadline fell back to uvicorn's own"
    uvicorn_private.set_head_deadline(DEADLINE)
    try:
        http = uvicorn_private.HeadDeadlineProtocol
        async with live_server(_app, lifespan="auto", http=http, timeout_keep_alive=KEEP_ALIVE) as live:
            yield int(live.base_url.rsplit(":", 1)[1])
    finally:
        uvicorn_private.set_head_deadline(uvicorn_private.DEFAULT_HEAD_DEADLINE)


async def _exchange(port: int, payload: bytes, *, dribble: bool = False) -> bytes:
    """What the server sent until it closed the connection (the test times out otherwise)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(payload)
    feeder = None
    if dribble:

        async def feed() -> None:
            for i in range(100):
                await asyncio.sleep(DEADLINE / 5)
                writer.write(f"X-{i}: y\r\n".encode())

        feeder = asyncio.create_task(feed())
    try:
        async with asyncio.timeout(DEADLINE * 20):
            return await reader.read()
    finally:
        if feeder is not None:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
        writer.close()


def test_the_private_hooks_exist() -> None:
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    for hook in ("connection_made", "on_response_complete", "connection_lost"):
        assert callable(getattr(AutoHTTPProtocol, hook, None)), f"{WHERE}: {AutoHTTPProtocol.__name__}.{hook} is gone"


async def test_an_idle_connection_is_closed_at_the_deadline() -> None:
    async with _server() as port:
        assert await _exchange(port, b"") == b""


async def test_a_slowloris_head_is_closed_unanswered() -> None:
    async with _server() as port:
        assert await _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n", dribble=True) == b""


async def test_requests_and_long_streams_are_served_then_keep_alive_closes() -> None:
    async with _server() as port:
        answer = await _exchange(port, b"GET /long HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"tick") == 4 and b"done" in answer, answer
        two = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 2
        assert (await _exchange(port, two)).count(b"HTTP/1.1 200") == 2


async def test_after_a_response_the_connection_idles_for_keep_alive_before_its_head_is_due() -> None:
    """The client, not the server, should end an idle pooled connection: after a response the
    head deadline starts once uvicorn's keep-alive is over, so a keep-alive longer than the
    clients' pools is the one that counts."""
    async with _server() as port:
        began = asyncio.get_running_loop().time()
        answer = await _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        held = asyncio.get_running_loop().time() - began
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert KEEP_ALIVE - 0.2 <= held < KEEP_ALIVE + DEADLINE + 2, f"{WHERE}: closed after {held:.2f} s"


@pytest.mark.parametrize(("signum", "interrupted"), [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_the_supervisor_tells_a_sigint_from_the_other_signals_that_stop_it(
    signum: signal.Signals, interrupted: bool
) -> None:
    """``serve --workers N`` exits 130 on Ctrl-C only if this holds: the signal, delivered to
    this process, goes through uvicorn's own handler and queue to ``handle_int`` (no worker is
    started: the supervisor's loop is driven by hand)."""
    import uvicorn

    assert uvicorn_private.RECORDS_SIGINT, f"{WHERE}: Multiprocess has no handle_int; --workers exits 0 on Ctrl-C"
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        running = uvicorn_private.supervisor(uvicorn.Config("nowhere:app", workers=2, log_config=None), [])
        assert signal.getsignal(signum) is not saved[signum], f"{WHERE}: the supervisor no longer takes signals over"
        signal.raise_signal(signum)
        running.handle_signals()
        assert running.should_exit.is_set(), f"{WHERE}: the supervisor did not stop for {signum}"
        assert running.interrupted is interrupted, f"{WHERE}: {signum} recorded as interrupted={running.interrupted}"
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
