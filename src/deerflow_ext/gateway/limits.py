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
"""

from __future__ import annotations

import asyncio

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .asgi import StartTracking

__all__ = ["BodySizeLimit", "BodyTooLarge", "BodyTooSlow"]


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


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_body_bytes: int, body_seconds: float = 60.0) -> None:
        self.app = app
        self.limit = max_body_bytes
        self.body_seconds = body_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, receive, send)
            return
        received = 0
        deadline: float | None = None  # loop time by which the whole body must be in
        body_done = False

        async def counting_receive() -> Message:
            nonlocal received, deadline, body_done
            if body_done:
                return await receive()
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + self.body_seconds
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyTooSlow(self.body_seconds) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        response = StartTracking(send)
        try:
            await self.app(scope, counting_receive, response)
        except (BodyTooLarge, BodyTooSlow) as exc:
            if response.started:
                raise
            await self._refuse(scope, receive, send, exc)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, exc: HTTPException | None = None) -> None:
        # Connection: close, since the rest of the body is never read.
        refusal = exc or BodyTooLarge(self.limit)
        await JSONResponse(
            {"detail": refusal.detail}, status_code=refusal.status_code, headers={"connection": "close"}
        )(scope, receive, send)
