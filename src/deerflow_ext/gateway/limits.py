"""Request bodies over ``gateway.limits.max_body_bytes`` are refused with 413, unread.

A declared ``Content-Length`` over the limit is answered before the route runs at all; a
body without one (chunked) is counted as it streams in, and refused as soon as the count
passes the limit — the server never holds more than the limit plus one chunk. This covers
every route, an extension's included: a route that reads ``request.body()`` gets the 413
as an ``HTTPException`` and the error handlers answer it.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .asgi import StartTracking

__all__ = ["BodySizeLimit", "BodyTooLarge"]


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(
            status_code=413,
            detail=f"request body is larger than {limit} bytes (gateway.limits.max_body_bytes in config.yaml)",
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
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        response = StartTracking(send)
        try:
            await self.app(scope, counting_receive, response)
        except BodyTooLarge:
            if response.started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Connection: close, since the rest of the body is never read.
        detail = BodyTooLarge(self.limit).detail
        await JSONResponse({"detail": detail}, status_code=413, headers={"connection": "close"})(scope, receive, send)
