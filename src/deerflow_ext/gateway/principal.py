"""Who an extension's route, action or tool is talking to: the one seam that answers.

This Gateway knows one principal. With an API token configured, every request that reaches
a route has presented it (``access.py`` refuses the rest in front of every route), and its
holder is the administrator. Without a token, only a caller on the loopback interface is:
the Host allow-list can be widened to other names, but an unauthenticated remote caller is
nobody's principal. Per-user identity, when it comes, replaces :func:`gateway_principal`
and nothing else: contributed routers read it through ``deerflow_extension_api``'s
``resolve_principal``/``require_admin``, which look the resolver up on ``app.state``.
"""

from __future__ import annotations

import ipaddress

from fastapi import FastAPI

from deerflow_extension_api import EXTENSION_PRINCIPAL_RESOLVER_KEY, ExtensionPrincipal

__all__ = ["GATEWAY_PRINCIPAL_ID", "gateway_principal", "install_principal_resolver"]

GATEWAY_PRINCIPAL_ID = "default"
_ADMIN = ExtensionPrincipal(GATEWAY_PRINCIPAL_ID, is_admin=True, roles=("admin",))


def _loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def gateway_principal(request: object, *, token_required: bool) -> ExtensionPrincipal | None:
    """The principal of ``request``: the administrator, or ``None`` (not authenticated)."""
    if token_required:
        return _ADMIN  # the front layer let it through: it presented the token
    client = getattr(request, "client", None)
    return _ADMIN if _loopback(getattr(client, "host", None)) else None


def install_principal_resolver(app: FastAPI, *, token_required: bool) -> None:
    """Put the resolver where ``deerflow_extension_api.resolve_principal`` looks for it."""

    def resolve(request: object) -> ExtensionPrincipal | None:
        return gateway_principal(request, token_required=token_required)

    setattr(app.state, EXTENSION_PRINCIPAL_RESOLVER_KEY, resolve)
