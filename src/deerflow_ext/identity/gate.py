"""What the Gateway holds when ``auth`` is configured: who a request is, and the rules.

:func:`build_identity_gate` loads the ``Auth`` (``loading``) and checks its handlers once;
the front layer asks :meth:`IdentityGate.authenticate` for each request's user and routes
ask :meth:`IdentityGate.authorize` (through ``gateway.scoping``) for its filter.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.types import Scope

from ..adapters.langgraph_sdk_private import registered_handlers
from ..config.schema import AuthConfig
from .authenticate import AuthenticationRefused, Authenticator
from .authorize import Authorizer, Filters
from .loading import AuthLoadError, load_auth
from .users import TOKEN_ADMIN, AuthenticatedUser

__all__ = ["IdentityGate", "build_identity_gate"]


@dataclass(frozen=True)
class IdentityGate:
    """``authenticator``: the ``@auth.authenticate`` function; ``authorizer``: the
    ``@auth.on`` handlers; ``admin_token``: the API token kept as an administrator's
    credential (``auth.admin_token``), else None."""

    authenticator: Authenticator
    authorizer: Authorizer
    admin_token: str | None = None

    async def authenticate(
        self, scope: Scope, presented_token: str | None
    ) -> AuthenticatedUser | AuthenticationRefused:
        token = self.admin_token
        if (
            token is not None
            and presented_token is not None
            and hmac.compare_digest(presented_token.encode(), token.encode())
        ):
            return TOKEN_ADMIN
        return await self.authenticator(scope)

    async def authorize(
        self, user: AuthenticatedUser, resource: str, action: str, value: dict[str, Any]
    ) -> Filters | None:
        return await self.authorizer.authorize(user, resource, action, value)


def build_identity_gate(config: AuthConfig, config_file: str | Path, api_token: str | None) -> IdentityGate:
    """The gate ``config`` describes (``AuthLoadError``: one line naming file and field)."""
    auth = load_auth(config.path, config_file)
    try:
        handlers = registered_handlers(auth)
    except LookupError as exc:
        raise AuthLoadError(f"{config_file}: auth.path: {exc}") from exc
    if handlers.authenticate is None:
        raise AuthLoadError(f"{config_file}: auth.path: {config.path!r} has no @auth.authenticate handler")
    try:
        authenticator = Authenticator(handlers.authenticate)
    except ValueError as exc:
        raise AuthLoadError(f"{config_file}: auth.path: {exc}") from exc
    if config.admin_token and api_token is None:
        raise AuthLoadError(
            f"{config_file}: auth.admin_token: true, but no API token is set (DEERFLOW_API_TOKEN or gateway.api_token)"
        )
    return IdentityGate(authenticator, Authorizer(handlers), api_token if config.admin_token else None)
