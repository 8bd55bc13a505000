"""``@auth.on`` handlers run as LangGraph's server runs them.

For a ``(resource, action)`` the most specific handler wins: ``@auth.on.<resource>.<action>``
(or ``@auth.on(resources=..., actions=...)`` naming both), then ``@auth.on.<resource>``,
then one registered for the action on any resource, then ``@auth.on``; with none of them
the request is allowed. The handler gets ``ctx`` (``Auth.types.AuthContext``: ``user``,
``permissions``, ``resource``, ``action``) and ``value`` (the operation's mutable payload,
LangGraph's ``Auth.types.on.<resource>.<action>.value`` keys), and answers:

* ``None`` or ``True``: allowed, unfiltered;
* a filter dict (``persistence.owner_filter``): allowed, on the rows it matches only;
* ``False``: 403. An ``Auth.exceptions.HTTPException``: its status. Any other exception:
  403 (logged): a handler that breaks refuses rather than lets through.

A handler may change ``value`` (a create handler stamping ``metadata["owner"]``, a store
handler rewriting ``namespace``); the caller persists what it finds there afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import HTTPException
from langgraph_sdk.auth.exceptions import HTTPException as AuthHTTPException
from langgraph_sdk.auth.types import AuthContext

from ..adapters.langgraph_sdk_private import RegisteredHandlers
from ..persistence.owner_filter import check_owner_filter
from .users import AuthenticatedUser

__all__ = ["RESOURCES", "Authorizer", "Filters"]

_log = logging.getLogger("deerflow_ext.identity")

Filters = Mapping[str, Any]
"""A handler's filter on a resource's metadata (LangGraph's ``FilterType``)."""

RESOURCES = frozenset({"threads", "assistants", "crons", "store"})


class Authorizer:
    """The handlers of one ``Auth``, looked up once per ``(resource, action)``."""

    def __init__(self, handlers: RegisteredHandlers) -> None:
        self._handlers = handlers
        self._chosen: dict[tuple[str, str], Callable[..., Any] | None] = {}

    @property
    def empty(self) -> bool:
        return not self._handlers.scoped and self._handlers.global_handler is None

    def handler(self, resource: str, action: str) -> Callable[..., Any] | None:
        """The handler LangGraph's precedence picks for ``resource``/``action``, or None."""
        key = (resource, action)
        if key not in self._chosen:
            scoped = self._handlers.scoped
            found = next(
                (scoped[k] for k in (key, (resource, "*"), ("*", action), ("*", "*")) if k in scoped),
                self._handlers.global_handler,
            )
            self._chosen[key] = found
        return self._chosen[key]

    async def authorize(
        self, user: AuthenticatedUser, resource: str, action: str, value: dict[str, Any]
    ) -> Filters | None:
        """The filter ``user`` is held to for ``action`` on ``resource`` (None: no filter),
        or ``HTTPException`` (403, or the handler's own status)."""
        handler = self.handler(resource, action)
        if handler is None or user.unscoped:
            return None
        ctx = AuthContext(permissions=list(user.permissions), user=user, resource=resource, action=action)  # type: ignore[arg-type]
        try:
            result = await handler(ctx=ctx, value=value)
        except AuthHTTPException as exc:
            raise HTTPException(exc.status_code, str(exc.detail), headers=dict(exc.headers or {})) from exc
        except Exception as exc:
            name = getattr(handler, "__name__", repr(handler))
            _log.exception("auth handler %s for %s.%s raised", name, resource, action)
            raise HTTPException(403, f"forbidden: the {resource}.{action} handler raised") from exc
        if result is None or result is True:
            return None
        if result is False:
            raise HTTPException(403, f"forbidden: {resource}.{action} refused")
        if isinstance(result, Mapping):
            try:
                check_owner_filter(result)
            except ValueError as exc:
                raise HTTPException(500, f"the {resource}.{action} auth handler returned a bad filter: {exc}") from exc
            return result or None
        raise HTTPException(
            500, f"the {resource}.{action} auth handler returned {type(result).__name__}; return None, a bool or a dict"
        )
