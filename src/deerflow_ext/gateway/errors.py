"""Every error is JSON ``{"detail": ...}`` with a message a person can act on.

FastAPI's default validation response is a list of pydantic error dicts; clients and
operators reading a log want one sentence naming the field, so ``detail`` is that sentence
and the structured list rides along under ``errors``. An error escaping a route an extension
contributed is answered the same way but attributed to that extension
(:class:`ContributedRouteErrors`).

An unexpected error is answered in front of the routes (``front.py``, with
:func:`log_unexpected` and :func:`internal_error`; :class:`UnexpectedErrors` is the same as a
middleware of its own) rather than by Starlette's handler for ``Exception``: that handler
re-raises after answering, and uvicorn then closes the keep-alive connection, so one bad
request cost the client its connection (and a pooled client a failed next request). The
front answers and swallows.
An error that says the database cannot be reached (refused, closed by the server, restarting,
pool exhausted, statement cancelled) is answered 503 with ``Retry-After`` instead: the
request was fine and will succeed once the database is back, and a client or a load balancer
should retry rather than report a bug (``/health`` says ``degraded`` meanwhile).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import StatementError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from deerflow_ext.exception_text import exception_text

from ..extensions.boundary.exits import EXTENSION_FAILURES
from ..extensions.boundary.loopwatch import RunningHook, register_site
from ..extensions.boundary.origin import is_host_cancellation
from ..extensions.serving.services_routers import route_extension
from .asgi import tracking

__all__ = [
    "ContributedRouteErrors",
    "TolerantJSONResponse",
    "UnexpectedErrors",
    "database_unavailable",
    "install_error_handlers",
    "internal_error",
    "json_bytes",
    "log_unexpected",
    "name_statements",
    "validation_message",
]

logger = logging.getLogger("deerflow_ext.gateway")


def _where(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p != "body"] or ["body"]
    return ".".join(parts)


def validation_message(errors: list[dict[str, Any]]) -> str:
    """``"input.messages: Field required; goal: Input should be a valid string"``."""
    messages = []
    for error in errors:
        if error.get("type") == "json_invalid":
            messages.append(f"request body is not valid JSON ({error.get('ctx', {}).get('error', 'parse error')})")
            continue
        messages.append(f"{_where(error.get('loc', ()))}: {error.get('msg', 'invalid')}")
    return "; ".join(messages) or "invalid request"


def _jsonable(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors]


async def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    return JSONResponse(status_code=422, content={"detail": validation_message(errors), "errors": _jsonable(errors)})


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail: Any = exc.detail
    if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
        # FastAPI's "error parsing the body" when json itself gave up on the nesting.
        return JSONResponse(status_code=422, content={"detail": "request body is nested too deeply to parse"})
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route for {request.method} {request.url.path}"
    elif exc.status_code == 405 and detail == "Method Not Allowed":
        detail = f"{request.method} is not allowed on {request.url.path}"
    return JSONResponse(status_code=exc.status_code, content={"detail": detail}, headers=exc.headers)


# Exception classes, by name in any driver (psycopg, asyncpg), that mean "the database is not
# answering", not "this request is wrong". SQLAlchemy's wrappers are judged by the driver's
# error they carry; sqlite3's OperationalError also means "no such table", so for SQLite only
# the messages of a busy or missing database file count.
_UNAVAILABLE = frozenset(
    {
        "OperationalError",  # psycopg: refused, closed, admin shutdown, statement timeout
        "InterfaceError",  # a connection that is already closed
        "ConnectionDoesNotExistError",
        "CannotConnectNowError",
        "AdminShutdownError",
        "PostgresConnectionError",
        "TooManyConnectionsError",
        "QueryCanceledError",
    }
)
_SQLITE_UNAVAILABLE = ("database is locked", "unable to open database file", "disk I/O error")
RETRY_AFTER_SECONDS = 2


def _says_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError):
        return True
    kind = type(exc)
    if kind.__module__.startswith("sqlalchemy"):
        if kind.__name__ == "TimeoutError":
            return True  # the pool had no connection to give within its timeout
        orig = getattr(exc, "orig", None)
        return _says_unavailable(orig) if isinstance(orig, BaseException) else False
    if kind.__module__ == "sqlite3":
        return any(text in str(exc) for text in _SQLITE_UNAVAILABLE)
    return bool({c.__name__ for c in kind.__mro__} & _UNAVAILABLE)


def database_unavailable(exc: BaseException) -> BaseException | None:
    """The exception in ``exc``'s chain that says the database cannot be reached, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _says_unavailable(current):
            return current
        current = current.__cause__ or current.__context__
    return None


def internal_error(exc: BaseException, *, database: bool = False) -> JSONResponse:
    """The JSON 500 for ``exc``; with ``database``, a 503 with ``Retry-After`` when ``exc``
    says the database cannot be reached."""
    if database and (cause := database_unavailable(exc)) is not None:
        return JSONResponse(
            status_code=503,
            content={"detail": f"the database is unavailable ({type(cause).__name__}); retry shortly"},
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    return JSONResponse(status_code=500, content={"detail": f"internal error: {type(exc).__name__}"})


def json_bytes(content: Any) -> bytes:
    """``content`` as Starlette's ``JSONResponse`` renders it, falling back to ``\\u`` escapes
    for text UTF-8 cannot encode (a lone surrogate in a stored value): valid JSON, not a 500."""
    try:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()
    except UnicodeEncodeError:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


class TolerantJSONResponse(JSONResponse):
    """JSON as Starlette renders it, or with ``\\u`` escapes where UTF-8 cannot say the text
    (:func:`json_bytes`)."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


class _AnswerFailures:
    """An ASGI middleware that answers the failures it :meth:`takes` with the JSON 500, on the
    same connection, unless the response has already started (then nothing can be answered
    and the failure propagates, ending the response)."""

    catches: tuple[type[BaseException], ...] = (Exception,)
    database_aware = False  # host routes only: an extension's failed connection is its own

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def takes(self, scope: Scope, exc: BaseException) -> bool:
        """Record *exc* and say whether to answer it; ``False`` lets it propagate."""
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        response = tracking(send)
        try:
            await self.app(scope, receive, response)
        except self.catches as exc:
            if not self.takes(scope, exc) or response.started:
                raise
            await internal_error(exc, database=self.database_aware)(scope, receive, send)


class UnexpectedErrors(_AnswerFailures):
    """Answer an exception no handler took with the JSON 500 and keep the connection.

    The Gateway does this in its front layer (``front.py``), right after CORS. Once a
    response has started (a stream), there is nothing left to answer: the exception
    propagates and the server ends the response.
    """

    database_aware = True

    def takes(self, scope: Scope, exc: BaseException) -> bool:
        log_unexpected(scope, exc)
        return True


STATEMENT_LOG_CHARS = 200
"""How much of a SQL statement a log line shows: its start (what it is), then its length."""
_CAUSE_LOG_CHARS = 500


def name_statements(exc: BaseException) -> None:
    """Cut each SQL statement in ``exc``'s chain to its first :data:`STATEMENT_LOG_CHARS`
    characters and its length. SQLAlchemy writes the whole statement into an error's text
    (``[SQL: ...]``), and a statement a client sized (a search naming 32,767 ids) made a
    one-megabyte log line per request; its parameters SQLAlchemy already cuts short."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        statement = getattr(current, "statement", None)
        if isinstance(current, StatementError) and isinstance(statement, str) and len(statement) > STATEMENT_LOG_CHARS:
            current.statement = f"{statement[:STATEMENT_LOG_CHARS]}… ({len(statement)} characters)"
        current = current.__cause__ or current.__context__


def log_unexpected(scope: Scope, exc: BaseException) -> None:
    """The log line of a failure no handler took: a traceback, or one line when the
    database cannot be reached (one for each request while it is down); a statement in
    either is named by its start, not written whole (:func:`name_statements`)."""
    name_statements(exc)
    if (cause := database_unavailable(exc)) is not None:
        text = exception_text(cause, one_line=True, limit=_CAUSE_LOG_CHARS)
        logger.warning("%s %s: the database is unavailable (%s)", scope["method"], scope["path"], text)
        return
    logger.exception("%s %s failed", scope["method"], scope["path"], exc_info=exc)


class ContributedRouteErrors(_AnswerFailures):
    """Answer an error escaping an *extension's* route with the JSON 500, attributed.

    Host routes keep the handler above. For a contributed route the log line and the
    ``router`` diagnostic name the extension (``Extension <use>: route GET /x raised ...``),
    and a ``CancelledError``, ``KeyboardInterrupt`` or ``SystemExit`` the endpoint raised
    itself is treated like any other failure — Starlette's handlers see only ``Exception``,
    so it would otherwise reach the server as a dropped connection (an extension cannot stop
    the Gateway: ``extensions/boundary/exits.py``). A cancellation of the request task itself (client
    gone, shutdown timeout) propagates. Once the response has started nothing can be
    answered: the error is attributed and then propagates as before.
    """

    catches = EXTENSION_FAILURES

    def takes(self, scope: Scope, exc: BaseException) -> bool:
        extension = route_extension(scope)
        if extension is None or is_host_cancellation(exc):
            return False
        diagnostics = scope["app"].state.extension_diagnostics  # create_app installs both
        text = f"route {scope['method']} {scope['path']} raised {exception_text(exc)}"
        diagnostics.record(extension, "router", text, exc=exc)
        return True


def _running_route(frame: Any) -> RunningHook | None:
    scope = frame.f_locals.get("scope")
    extension = route_extension(scope) if scope is not None else None
    return None if extension is None else RunningHook(extension, f"route {scope['method']} {scope['path']}")


register_site(ContributedRouteErrors.__call__, _running_route)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_middleware(ContributedRouteErrors)
