"""``langgraph_sdk.Auth``'s registered handlers, which the SDK keeps in private attributes.

An ``Auth`` object records what its decorators registered and offers no public way to read
it back: LangGraph's server reads the attributes directly (the SDK's own comment calls their
names and types part of its API). The Gateway does the same, here and only here.

Private: ``Auth._authenticate_handler`` (the ``@auth.authenticate`` function or ``None``),
``Auth._handlers`` (``{(resource, action): [handler]}``, ``"*"`` for "any") and
``Auth._global_handlers`` (the ``@auth.on`` handler, at most one).
Fallback: none that keeps the Gateway open. Should the names go, :func:`registered_handlers`
raises ``LookupError`` naming the SDK version, and startup stops with that line: serving
without the operator's authorization rules would hand every user every thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

__all__ = ["RegisteredHandlers", "registered_handlers"]


@dataclass(frozen=True)
class RegisteredHandlers:
    """What an ``Auth`` holds: its authenticate function, its ``(resource, action)`` handlers
    and its global handler (``None`` when not registered)."""

    authenticate: Callable[..., Any] | None
    scoped: Mapping[tuple[str, str], Callable[..., Any]] = field(default_factory=dict)
    global_handler: Callable[..., Any] | None = None


def _sdk_version() -> str:
    try:
        return f"langgraph-sdk {metadata.version('langgraph-sdk')}"
    except metadata.PackageNotFoundError:  # pragma: no cover - it is a dependency
        return "langgraph-sdk (version unknown)"


def registered_handlers(auth: object) -> RegisteredHandlers:
    """The handlers ``auth`` (a ``langgraph_sdk.Auth``) registered."""
    try:
        authenticate = auth._authenticate_handler  # type: ignore[attr-defined]
        scoped = auth._handlers  # type: ignore[attr-defined]
        global_handlers = auth._global_handlers  # type: ignore[attr-defined]
    except AttributeError as exc:
        raise LookupError(f"{_sdk_version()}: Auth no longer keeps its handlers where the Gateway reads them") from exc
    if not isinstance(scoped, Mapping) or not isinstance(global_handlers, list):
        raise LookupError(f"{_sdk_version()}: Auth's handler tables changed shape")
    handlers: dict[tuple[str, str], Callable[..., Any]] = {}
    for key, registered in scoped.items():
        if registered:
            handlers[(str(key[0]), str(key[1]))] = registered[-1]
    return RegisteredHandlers(authenticate, handlers, global_handlers[-1] if global_handlers else None)
