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

from deerflow_extension_api import resolve_principal

from ..identity import AuthenticatedUser, Filters, IdentityGate
from ..persistence.models import DEFAULT_USER_ID
from ..persistence.records import ThreadRecord
from .state import GatewayRuntime

__all__ = ["RUN_USER_METADATA_KEY", "admin_only", "authorized", "request_user", "run_owner", "visible_thread"]

RUN_USER_METADATA_KEY = "langgraph_auth_user_id"
"""The run metadata key that records the authenticated user who started a run (``auth``),
LangGraph's own name for it, so LangGraph clients and run readers find it where they look.
It repeats the run's owner (``runs.user_id``); the run's context carries the owner under the
host key ``user_id``, which plugin tools read."""


def run_owner(request: object) -> str:
    """Whose run ``request`` starts: the one rule for a run's owner. The request's principal
    (with ``auth``, the authenticated user; without, the Gateway's one principal), and
    ``default`` for a request with none. Recorded as ``runs.user_id``, set as the run
    context's ``user_id`` by the host, and, with ``auth``, in the run's metadata under
    :data:`RUN_USER_METADATA_KEY`."""
    principal = resolve_principal(request)
    return principal.user_id if principal is not None else DEFAULT_USER_ID


def request_user(request: object) -> AuthenticatedUser | None:
    """The user ``auth`` authenticated for ``request``; None without ``auth``."""
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
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
