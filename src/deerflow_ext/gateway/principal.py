"""Who an extension's route, action or tool is talking to: the one seam that answers.

Without ``auth`` in config.yaml this Gateway knows one principal. With an API token
configured, every request that reaches a route has presented it (``access.py`` refuses the
rest in front of every route), and its holder is the administrator. Without a token, only a
caller on the loopback interface is: the Host allow-list can be widened to other names, but
an unauthenticated remote caller is nobody's principal.

With ``auth`` configured, the principal is the request's user (``identity``: what
``@auth.authenticate`` returned, which the front layer put in ``scope["user"]``):
``user_id`` is its ``identity``, ``roles`` its ``permissions``, and ``is_admin`` holds when
those include ``"admin"`` (``identity.ADMIN_PERMISSION``) or the request presented the API
token kept by ``auth.admin_token``. ``require_admin`` therefore refuses every other user.
Contributed routers read it through ``deerflow_extension_api``'s
``resolve_principal``/``require_admin``, which look the resolver up on ``app.state``; the
run machinery reads it with :func:`request_principal` to record a run's owner.
"""

from __future__ import annotations

import ipaddress

from fastapi import FastAPI

from deerflow_extension_api import EXTENSION_PRINCIPAL_RESOLVER_KEY, ExtensionPrincipal

from ..identity import AuthenticatedUser

__all__ = [
    "GATEWAY_PRINCIPAL_ID",
    "gateway_principal",
    "install_principal_resolver",
    "principal_of_user",
    "request_principal",
]

GATEWAY_PRINCIPAL_ID = "default"
_ADMIN = ExtensionPrincipal(GATEWAY_PRINCIPAL_ID, is_admin=True, roles=("admin",))


def _loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def principal_of_user(user: AuthenticatedUser) -> ExtensionPrincipal:
    """The principal of an authenticated user: identity, permissions as roles, admin flag."""
    return ExtensionPrincipal(user.identity, is_admin=user.is_admin, roles=tuple(user.permissions))


def request_principal(request: object) -> ExtensionPrincipal | None:
    """The principal ``auth`` authenticated for ``request`` (None: no ``auth`` configured,
    or a path that needs no user)."""
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    return principal_of_user(user) if isinstance(user, AuthenticatedUser) else None


def gateway_principal(request: object, *, token_required: bool, identity: bool = False) -> ExtensionPrincipal | None:
    """The principal of ``request``: its user (``identity``: ``auth`` configured), the
    administrator, or ``None`` (not authenticated)."""
    if identity:
        return request_principal(request)
    if token_required:
        return _ADMIN  # the front layer let it through: it presented the token
    client = getattr(request, "client", None)
    return _ADMIN if _loopback(getattr(client, "host", None)) else None


def install_principal_resolver(app: FastAPI, *, token_required: bool, identity: bool = False) -> None:
    """Put the resolver where ``deerflow_extension_api.resolve_principal`` looks for it."""

    def resolve(request: object) -> ExtensionPrincipal | None:
        return gateway_principal(request, token_required=token_required, identity=identity)

    setattr(app.state, EXTENSION_PRINCIPAL_RESOLVER_KEY, resolve)
