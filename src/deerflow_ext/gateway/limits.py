"""Request bodies over ``gateway.limits.max_body_bytes`` are refused with 413, unread.

A declared ``Content-Length`` over the limit is answered before the route runs at all; a
body without one (chunked) is counted as it streams in, and refused as soon as the count
passes the limit — the server never holds more than the limit plus one chunk. This covers
every route, an extension's included: a route that reads ``request.body()`` gets the 413
as an ``HTTPException`` and the error handlers answer it.

A body must also arrive in full within ``gateway.limits.body_timeout_seconds`` of the
route's first read (408 past it): a client sending a byte a second stays under any size
limit while it holds a connection and a route. Only reads of the body are timed; once it is
complete, ``receive`` (a streamed response listening for the client leaving) waits freely.
An HTTP/1 request that announces no body (no ``Transfer-Encoding``, no or a zero
``Content-Length``: it then has none) has nothing to count or time, so its ``receive`` is
left as it is (:func:`announces_body`): a GET (a poll, a join, a listing) pays nothing here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .asgi import tracking

__all__ = ["BodyLimits", "BodySizeLimit", "BodyTooLarge", "BodyTooSlow", "announces_body", "declared_length"]


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(
            status_code=413,
            detail=f"request body is larger than {limit} bytes (gateway.limits.max_body_bytes in config.yaml)",
        )


class BodyTooSlow(HTTPException):
    def __init__(self, seconds: float) -> None:
        super().__init__(
            status_code=408,
            detail=f"request body did not arrive within {seconds:g} s "
            "(gateway.limits.body_timeout_seconds in config.yaml)",
        )


def declared_length(value: str | bytes | None) -> int | None:
    """A ``Content-Length`` value as a number; None when absent or not a number."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


_HTTP1 = frozenset({"1.0", "1.1"})


def announces_body(http_version: str, content_length: str | None, transfer_encoding: str | None) -> bool:
    """Whether a request may carry a body. In HTTP/1 its head says so (RFC 9112 6.3: without
    either header, a request has none); a malformed length counts as a body (the server
    decides). Over HTTP/2 or 3 a body needs neither header, so it always may."""
    if http_version not in _HTTP1 or transfer_encoding is not None:
        return True
    return content_length is not None and declared_length(content_length) != 0


def _declared(scope: Scope) -> int | None:
    return declared_length(next((value for name, value in scope["headers"] if name == b"content-length"), None))


@dataclass(frozen=True)
class BodyLimits:
    """``gateway.limits``' size and time bounds on one request body, and their refusals."""

    max_body_bytes: int
    body_seconds: float = 60.0

    def receive(self, receive: Receive) -> Receive:
        """``receive``, counting and timing the body's messages (see the module's docstring)."""
        limit, seconds = self.max_body_bytes, self.body_seconds
        received = 0
        deadline: float | None = None  # loop time by which the whole body must be in
        body_done = False

        async def counting_receive() -> Message:
            nonlocal received, deadline, body_done
            if body_done:
                return await receive()
            if deadline is None:
                deadline = asyncio.get_running_loop().time() + seconds
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyTooSlow(seconds) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        return counting_receive

    async def refuse(self, scope: Scope, receive: Receive, send: Send, exc: HTTPException | None = None) -> None:
        """Answer ``exc`` (by default: the declared length is over the limit) with its JSON
        error and ``Connection: close``, since the rest of the body is never read."""
        refusal = exc or BodyTooLarge(self.max_body_bytes)
        await JSONResponse(
            {"detail": refusal.detail}, status_code=refusal.status_code, headers={"connection": "close"}
        )(scope, receive, send)


class BodySizeLimit:
    """:class:`BodyLimits` as a middleware of its own (the Gateway applies them in ``front.py``)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, body_seconds: float = 60.0) -> None:
        self.app = app
        self.limits = BodyLimits(max_body_bytes, body_seconds)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared(scope)
        if declared is not None and declared > self.limits.max_body_bytes:
            await self.limits.refuse(scope, receive, send)
            return
        response = tracking(send)
        try:
            await self.app(scope, self.limits.receive(receive), response)
        except (BodyTooLarge, BodyTooSlow) as exc:
            if response.started:
                raise
            await self.limits.refuse(scope, receive, send, exc)
