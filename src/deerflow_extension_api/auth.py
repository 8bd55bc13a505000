"""Who is calling a contributed route, and may they manage a plugin.

Routers are built while ``install()`` runs, before any request exists, so the host cannot
hand an identity over at registration. Instead it puts resolvers on ``app.state`` under the
keys below, and these functions read them from the request a route receives. ``request``
is duck-typed (anything with ``.app.state``), so the contract needs no web framework.

Every function fails closed: a missing resolver, one that raises, or one that returns the
wrong type means "no principal" or "not permitted", never "allowed". A ``PermissionError``
raised here is not turned into HTTP by the host: a route maps it to 403 itself.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Literal, cast

__all__ = [
    "EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY",
    "EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY",
    "EXTENSION_PRINCIPAL_RESOLVER_KEY",
    "ExtensionPrincipal",
    "arequire_plugin_management",
    "require_admin",
    "require_plugin_management",
    "resolve_principal",
]

logger = logging.getLogger("deerflow_extension_api.auth")

EXTENSION_PRINCIPAL_RESOLVER_KEY = "deerflow_extension_principal_resolver"
EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY = "deerflow_extension_plugin_authz_resolver"
EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY = "deerflow_extension_plugin_authz_resolver_async"

# The host's plugin namespace rule, repeated here so a bad namespace is refused before any
# resolver sees it (the host's registry applies the same expression).
_NAMESPACE = re.compile(r"[a-z][a-z0-9_.-]{0,95}")


@dataclass(frozen=True, slots=True)
class ExtensionPrincipal:
    """The authenticated caller as the host sees it; ``user_id`` keys resource ownership."""

    user_id: str
    is_admin: bool = False
    is_internal: bool = False
    roles: tuple[str, ...] = ()


def _app_state_value(request: object, key: str) -> object:
    state = getattr(getattr(request, "app", None), "state", None)
    return getattr(state, key, None)


def resolve_principal(request: object) -> ExtensionPrincipal | None:
    """The request's principal, or ``None`` (no resolver, resolver failed, wrong type)."""
    resolver = _app_state_value(request, EXTENSION_PRINCIPAL_RESOLVER_KEY)
    if not callable(resolver):
        return None
    try:
        principal = resolver(request)
    except Exception as exc:  # the type only: a message could carry credentials
        logger.warning("extension principal resolver failed: %s", type(exc).__name__)
        return None
    return principal if isinstance(principal, ExtensionPrincipal) else None


def require_admin(request: object) -> ExtensionPrincipal:
    """The principal when it is an administrator; ``PermissionError`` otherwise."""
    principal = resolve_principal(request)
    if principal is None or not principal.is_admin:
        raise PermissionError("this endpoint requires an administrator account")
    return principal


def _check_management_arguments(namespace: object, scope: object) -> None:
    if scope not in ("read", "write"):
        raise ValueError(f"scope must be 'read' or 'write', got {scope!r}")
    if not isinstance(namespace, str) or _NAMESPACE.fullmatch(namespace) is None:
        raise ValueError(f"invalid plugin namespace {namespace!r}")


def _authenticated(request: object) -> ExtensionPrincipal:
    principal = resolve_principal(request)
    if principal is None:
        raise PermissionError("this endpoint requires an authenticated account")
    return principal


def require_plugin_management(
    request: object, namespace: str, *, scope: Literal["read", "write"] = "read"
) -> ExtensionPrincipal:
    """The principal when the host's policy lets it manage ``namespace`` at ``scope``.

    With authorization switched off the host's resolver answers ``True`` for everyone; a
    deployment that wants an administrator floor keeps calling :func:`require_admin` too.
    Only a literal ``True`` permits. Async routes use :func:`arequire_plugin_management`.
    """
    _check_management_arguments(namespace, scope)
    principal = _authenticated(request)
    resolver = _app_state_value(request, EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY)
    decision: object = None
    if callable(resolver):
        try:
            decision = resolver(request, namespace, scope)
        except Exception as exc:
            logger.warning("plugin management resolver failed: %s", type(exc).__name__)
    if decision is not True:
        raise PermissionError(f"plugin management ({scope}) is not permitted for {namespace}")
    return principal


async def arequire_plugin_management(
    request: object, namespace: str, *, scope: Literal["read", "write"] = "read"
) -> ExtensionPrincipal:
    """:func:`require_plugin_management` for async routes.

    Reads only the async resolver: a host that installed just the synchronous one denies,
    rather than running its (possibly blocking) policy lookup on the event loop.
    """
    _check_management_arguments(namespace, scope)
    principal = _authenticated(request)
    resolver = _app_state_value(request, EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY)
    decision: object = None
    if callable(resolver):
        try:
            # A sync resolver returns no awaitable: awaiting it raises TypeError, which denies.
            decision = await cast("Awaitable[object]", resolver(request, namespace, scope))
        except Exception as exc:
            logger.warning("plugin management resolver failed: %s", type(exc).__name__)
    if decision is not True:
        raise PermissionError(f"plugin management ({scope}) is not permitted for {namespace}")
    return principal
