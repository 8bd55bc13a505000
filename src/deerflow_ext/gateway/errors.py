"""Every error is JSON ``{"detail": ...}`` with a message a person can act on.

FastAPI's default validation response is a list of pydantic error dicts; clients and
operators reading a log want one sentence naming the field, so ``detail`` is that sentence
and the structured list rides along under ``errors``. An error escaping a route an extension
contributed is answered the same way but attributed to that extension
(:class:`ContributedRouteErrors`).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deerflow_ext.exception_text import exception_text

from ..extensions.exits import EXTENSION_FAILURES
from ..extensions.gateway import route_extension
from ..extensions.loopwatch import RunningHook, register_site
from ..extensions.origin import is_host_cancellation

__all__ = ["ContributedRouteErrors", "install_error_handlers", "validation_message"]

logger = logging.getLogger("deerflow_ext.gateway")


def _where(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p != "body"] or ["body"]
    return ".".join(parts)


def validation_message(errors: list[dict[str, Any]]) -> str:
    """``"input.messages: Field required; goal: Input should be a valid string"``."""
    messages = []
    for error in errors:
        if error.get("type") == "json_invalid":
            messages.append(
                f"request body is not valid JSON ({error.get('ctx', {}).get('error', 'parse error')})"
            )
            continue
        messages.append(f"{_where(error.get('loc', ()))}: {error.get('msg', 'invalid')}")
    return "; ".join(messages) or "invalid request"


def _jsonable(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors]


async def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    return JSONResponse(
        status_code=422, content={"detail": validation_message(errors), "errors": _jsonable(errors)}
    )


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail: Any = exc.detail
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route for {request.method} {request.url.path}"
    elif exc.status_code == 405 and detail == "Method Not Allowed":
        detail = f"{request.method} is not allowed on {request.url.path}"
    return JSONResponse(status_code=exc.status_code, content={"detail": detail}, headers=exc.headers)


def _internal_error(exc: BaseException) -> JSONResponse:
    return JSONResponse(status_code=500, content={"detail": f"internal error: {type(exc).__name__}"})


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return _internal_error(exc)


class ContributedRouteErrors:
    """Answer an error escaping an *extension's* route with the JSON 500, attributed.

    Host routes keep the handler above. For a contributed route the log line and the
    ``router`` diagnostic name the extension (``Extension <use>: route GET /x raised ...``),
    and a ``CancelledError``, ``KeyboardInterrupt`` or ``SystemExit`` the endpoint raised
    itself is treated like any other failure — Starlette's handlers see only ``Exception``,
    so it would otherwise reach the server as a dropped connection (an extension cannot stop
    the Gateway: ``extensions/exits.py``). A cancellation of the request task itself (client
    gone, shutdown timeout) propagates. Once the response has started nothing can be
    answered: the error is attributed and then propagates as before.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except EXTENSION_FAILURES as exc:
            extension = route_extension(scope)
            if extension is None or is_host_cancellation(exc):
                raise
            diagnostics = scope["app"].state.extension_diagnostics  # create_app installs both
            text = f"route {scope['method']} {scope['path']} raised {exception_text(exc)}"
            diagnostics.record(extension, "router", text, exc=exc)
            if started:
                raise
            await _internal_error(exc)(scope, receive, send)


def _running_route(frame: Any) -> RunningHook | None:
    scope = frame.f_locals.get("scope")
    extension = route_extension(scope) if scope is not None else None
    return None if extension is None else RunningHook(extension, f"route {scope['method']} {scope['path']}")


register_site(ContributedRouteErrors.__call__, _running_route)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
    app.add_middleware(ContributedRouteErrors)
