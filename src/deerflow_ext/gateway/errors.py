"""Every error is JSON ``{"detail": ...}`` with a message a person can act on.

FastAPI's default validation response is a list of pydantic error dicts; clients and
operators reading a log want one sentence naming the field, so ``detail`` is that sentence
and the structured list rides along under ``errors``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["install_error_handlers", "validation_message"]

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


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse(status_code=500, content={"detail": f"internal error: {type(exc).__name__}"})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
