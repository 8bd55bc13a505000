"""``@auth.authenticate`` called as LangGraph's server calls it, once per API request.

The function declares what it wants by parameter name and gets exactly that: ``request``
(a Starlette ``Request``), ``scope`` (the ASGI scope), ``path``, ``method``,
``path_params`` (empty: authentication runs before routing, as on LangGraph's server),
``query_params`` (``dict[str, str]``), ``headers`` (``dict[bytes, bytes]``, lower-case
names) and ``authorization`` (the ``Authorization`` header, or ``None``). Which ones it
declares is read once, at startup; a name the Gateway does not pass stops startup.

Its answer becomes the request's user (``users.user_of``). An
``Auth.exceptions.HTTPException`` answers with its status, detail and headers; any other
exception, or a return that is no user, answers 401 and is logged with its traceback: a
request is never let through because the authenticator broke.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph_sdk.auth.exceptions import HTTPException as AuthHTTPException
from starlette.requests import Request
from starlette.types import Scope

from .users import AuthenticatedUser, InvalidUserError, user_of

__all__ = ["AUTHENTICATE_PARAMETERS", "AuthenticationRefused", "Authenticator"]

_log = logging.getLogger("deerflow_ext.identity")

AUTHENTICATE_PARAMETERS = frozenset(
    {"request", "scope", "path", "method", "path_params", "query_params", "headers", "authorization"}
)


@dataclass(frozen=True)
class AuthenticationRefused:
    """Why a request has no user: the status, ``detail`` and headers to answer with."""

    status: int
    detail: str
    headers: dict[str, str]


class Authenticator:
    """Runs one ``@auth.authenticate`` function (``ValueError`` at construction when it
    wants a parameter the Gateway does not pass, or is not a coroutine function)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        name = getattr(function, "__name__", repr(function))
        if not inspect.iscoroutinefunction(function):
            raise ValueError(f"@auth.authenticate handler {name!r} must be an async function")
        wanted = []
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                continue
            if parameter.name not in AUTHENTICATE_PARAMETERS:
                raise ValueError(
                    f"@auth.authenticate handler {name!r} takes {parameter.name!r}; the Gateway passes "
                    f"{', '.join(sorted(AUTHENTICATE_PARAMETERS))}"
                )
            wanted.append(parameter.name)
        self.function = function
        self.wanted = tuple(wanted)

    def _arguments(self, scope: Scope) -> dict[str, Any]:
        arguments: dict[str, Any] = {}
        for name in self.wanted:
            if name == "request":
                arguments[name] = Request(scope)
            elif name == "scope":
                arguments[name] = scope
            elif name == "path":
                arguments[name] = scope["path"]
            elif name == "method":
                arguments[name] = scope.get("method", "GET")
            elif name == "path_params":
                arguments[name] = dict(scope.get("path_params") or {})
            elif name == "query_params":
                arguments[name] = dict(Request(scope).query_params)
            elif name == "headers":
                arguments[name] = dict(scope["headers"])
            elif name == "authorization":
                found = [v for k, v in scope["headers"] if k == b"authorization"]
                arguments[name] = found[-1].decode("latin-1") if found else None
        return arguments

    async def __call__(self, scope: Scope) -> AuthenticatedUser | AuthenticationRefused:
        """The request's user, or why there is none."""
        try:
            returned = await self.function(**self._arguments(scope))
        except AuthHTTPException as exc:
            return AuthenticationRefused(exc.status_code, str(exc.detail), dict(exc.headers or {}))
        except Exception:
            _log.exception("@auth.authenticate raised on %s %s", scope.get("method", "GET"), scope["path"])
            return AuthenticationRefused(401, "authentication failed", {"www-authenticate": "Bearer"})
        try:
            return user_of(returned)
        except InvalidUserError as exc:
            _log.error("@auth.authenticate returned no user on %s: %s", scope["path"], exc)
            return AuthenticationRefused(401, f"authentication failed: {exc}", {"www-authenticate": "Bearer"})
