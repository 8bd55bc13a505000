"""The Gateway's front layer (``gateway/front.py``) answers as the middlewares it replaced did.

Its one shortcut with a visible edge is CORS: a request without ``Origin`` skips Starlette's
CORS middleware and gets the ``Vary`` that middleware would have added; the response heads
are compared with that middleware's, for every shape of ``Vary`` a route may set. The other
is the body: a request that announces none reaches the route with the server's own
``receive``, and one that does is still counted and refused past the limit (413) and the
deadline (408), with CORS headers on the refusal.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Message, Receive, Scope, Send

from deerflow_ext.gateway.access import AccessPolicy
from deerflow_ext.gateway.cors import LOOPBACK, cors_layer
from deerflow_ext.gateway.front import GatewayFront

ORIGINS = (LOOPBACK, "https://ui.example")
VARIES: dict[str, list[tuple[str, str]]] = {
    "none": [],
    "one": [("vary", "Accept-Encoding")],
    "two": [("vary", "Accept-Encoding"), ("x-other", "1"), ("vary", "Cookie")],
}


async def _route(scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive)
    body = await request.body()
    response = PlainTextResponse(f"{len(body)}")
    for name, value in VARIES[request.url.path.strip("/") or "none"]:
        response.raw_headers.append((name.encode(), value.encode()))
    await response(scope, receive, send)


def _front(app: Any = _route, **limits: Any) -> GatewayFront:
    policy = AccessPolicy(hosts=("*",), origins=ORIGINS)
    return GatewayFront(app, policy=policy, max_body_bytes=limits.get("max", 64), body_seconds=limits.get("sec", 5.0))


async def _heads(app: Any, path: str, headers: dict[str, str], method: str = "GET") -> list[tuple[bytes, bytes]]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        response = await client.request(method, path, headers=headers)
    return [(name.lower(), value) for name, value in response.headers.raw]


@pytest.mark.parametrize("path", ["/none", "/one", "/two"])
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"origin": "http://localhost:3000"},
        {"origin": "https://evil.example"},
        {"origin": "https://ui.example", "access-control-request-method": "POST"},
    ],
    ids=["no-origin", "allowed", "foreign", "preflight"],
)
async def test_response_heads_are_those_starlettes_cors_gives(path: str, headers: dict[str, str]) -> None:
    method = "OPTIONS" if "access-control-request-method" in headers else "GET"
    ours = await _heads(_front(), path, headers, method)
    theirs = await _heads(cors_layer(_route, ORIGINS), path, headers, method)
    assert ours == theirs
    assert any(name == b"vary" and b"Origin" in value for name, value in ours) or method == "OPTIONS"


class _Echo:
    """A route that reads its body and says whether its ``receive`` is the server's."""

    server_receive: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await Request(scope, receive).body()
        own = b"server" if receive is self.server_receive else b"wrapped"
        await Response(own + b" %d" % len(body))(scope, receive, send)


async def _call(
    echo: _Echo,
    headers: list[tuple[bytes, bytes]],
    chunks: list[bytes],
    pause: float = 0.0,
    http_version: str = "1.1",
    **limits: Any,
) -> tuple[int, bytes, dict[bytes, bytes]]:
    """POST ``chunks`` through the front to ``echo``: the status, body and head answered."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": http_version,
        "method": "POST",
        "scheme": "http",
        "path": "/echo",
        "raw_path": b"/echo",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    pending = list(chunks)

    async def receive() -> Message:
        if not pending:
            await asyncio.Event().wait()  # the client stays
        await asyncio.sleep(pause)
        body = pending.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(pending)}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    echo.server_receive = receive
    await _front(echo, **limits)(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), dict(sent[0]["headers"])


async def test_a_request_without_a_body_keeps_the_servers_receive() -> None:
    echo = _Echo()
    assert (await _call(echo, [], [b""]))[:2] == (200, b"server 0")
    assert (await _call(echo, [(b"content-length", b"0")], [b""]))[:2] == (200, b"server 0")
    assert (await _call(echo, [(b"content-length", b"5")], [b"hello"]))[:2] == (200, b"wrapped 5")
    # HTTP/2 needs neither header for a body: it is counted whatever the head says.
    assert (await _call(echo, [], [b"hello"], http_version="2"))[:2] == (200, b"wrapped 5")


async def test_bodies_are_still_counted_and_timed() -> None:
    echo = _Echo()
    chunked = [(b"transfer-encoding", b"chunked"), (b"origin", b"https://ui.example")]
    status, body, heads = await _call(echo, chunked, [b"12345", b"67890"], max=8)
    assert status == 413 and b"max_body_bytes" in body
    assert heads[b"access-control-allow-origin"] == b"https://ui.example"
    assert heads[b"connection"] == b"close"
    status, body, heads = await _call(echo, chunked[:1], [b"1", b"2"], pause=0.2, sec=0.05)
    assert status == 408 and b"body_timeout_seconds" in body
    assert heads[b"vary"] == b"Origin"
    assert (await _call(echo, [(b"content-length", b"9")], [b"123456789"], max=8))[0] == 413
