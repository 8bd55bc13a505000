"""Where a route meets the ``@auth.on`` handlers (``identity``): one call per operation.

:func:`authorized` runs the handler LangGraph's precedence picks for the resource and
action with the operation's ``value`` and answers its filter (None: unfiltered), raising the
handler's refusal as an HTTP error. A route passes the filter to the store, which puts it
into the SQL that reads, counts, updates or deletes (``persistence.owner_filter``).

Without ``auth`` configured no request carries a user and :func:`authorized` is one dict
lookup and a ``None`` check: the no-auth request path costs nothing more.
:func:`visible_thread` is the check the routes under a thread share (its runs, state,
history): the thread, as the user may read it, or 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request

from ..extensions.composition.plugin_tools import RUN_USER_CONTEXT_KEY
from ..identity import AuthenticatedUser, Filters, IdentityGate
from ..persistence.records import ThreadRecord
from .state import GatewayRuntime

__all__ = ["RUN_OWNER_KEY", "admin_only", "authorized", "request_user", "visible_thread"]

RUN_OWNER_KEY = RUN_USER_CONTEXT_KEY
"""The run metadata key (and run context key) that records the user who created the run,
LangGraph's own name for it (``langgraph_auth_user_id``): agent code, run readers and plugin
tools read it there."""


def request_user(request: Request) -> AuthenticatedUser | None:
    """The user ``auth`` authenticated for ``request``; None without ``auth``."""
    user = request.scope.get("user")
    return user if isinstance(user, AuthenticatedUser) else None


def admin_only(request: Request) -> None:
    """403 for a user who is not an administrator (``auth``): the operator's routes (the
    extensions' status and configuration, metrics) change or describe the whole Gateway.
    Without ``auth``, whoever reached the route is the administrator already."""
    user = request.scope.get("user")
    if isinstance(user, AuthenticatedUser) and not user.is_admin:
        raise HTTPException(status_code=403, detail="this route is for administrators (the 'admin' permission)")


async def authorized(request: Request, resource: str, action: str, value: dict[str, Any]) -> Filters | None:
    """The filter the request's user is held to for ``action`` on ``resource``."""
    user = request.scope.get("user")
    if user is None or not isinstance(user, AuthenticatedUser):
        return None
    gate: IdentityGate = request.app.state.identity
    return await gate.authorize(user, resource, action, value)


async def visible_thread(
    request: Request, runtime: GatewayRuntime, thread_id: str, action: str = "read", value: dict[str, Any] | None = None
) -> None:
    """404 unless the thread exists and the user's ``threads.<action>`` filter matches it;
    without ``auth``, nothing (the route's own lookup answers for a missing thread)."""
    if request.scope.get("user") is None:
        return
    filters = await authorized(request, "threads", action, value if value is not None else {"thread_id": thread_id})
    if filters is None:
        return
    record: ThreadRecord | None = await runtime.store.get_thread(thread_id, filters)
    if record is None:
        raise HTTPException(status_code=404, detail=f"thread {thread_id} not found")
