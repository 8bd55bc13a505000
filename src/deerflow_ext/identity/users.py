"""The request's user: what ``@auth.authenticate`` returned, in the shape handlers expect.

LangGraph accepts three returns and hands handlers one user object either way: a string
(the identity), a mapping with ``identity`` (``MinimalUserDict``: ``permissions``,
``display_name`` and any keys of the application's own) or an object with an ``identity``
attribute. :class:`AuthenticatedUser` is that object: ``ctx.user.identity``,
``ctx.user.permissions``, ``ctx.user["email"]`` and ``ctx.user.email`` all work, as on
LangGraph's server.

Administrators: a user whose permissions include :data:`ADMIN_PERMISSION` (``"admin"``) is
the Gateway's administrator (``ExtensionPrincipal.is_admin``), and so is the holder of the
API token kept by ``auth.admin_token``; the latter is the only user no handler scopes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ADMIN_PERMISSION", "REQUEST_USER", "TOKEN_ADMIN", "AuthenticatedUser", "user_of"]

ADMIN_PERMISSION = "admin"
"""The permission that makes a user an administrator of the Gateway."""


class InvalidUserError(ValueError):
    """``@auth.authenticate`` returned something that is not a user."""


@dataclass(frozen=True)
class AuthenticatedUser:
    """A user LangGraph's handlers can read: ``identity``, ``permissions``,
    ``display_name``, ``is_authenticated`` and the authenticator's own ``fields``.

    ``unscoped``: the API token's administrator (``auth.admin_token``), whom no
    authorization handler filters."""

    identity: str
    permissions: tuple[str, ...] = ()
    display_name: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    unscoped: bool = False
    is_authenticated: bool = True

    @property
    def is_admin(self) -> bool:
        return self.unscoped or ADMIN_PERMISSION in self.permissions

    def __getitem__(self, key: str) -> Any:
        if key in self.fields:
            return self.fields[key]
        if key in ("identity", "permissions", "display_name", "is_authenticated"):
            return getattr(self, key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self.fields or key in ("identity", "permissions", "display_name", "is_authenticated")

    def __iter__(self) -> Iterator[str]:
        return iter({**self.fields, "identity": self.identity}.keys())

    def __getattr__(self, name: str) -> Any:
        # Only for names the dataclass does not have: the authenticator's own keys.
        fields = object.__getattribute__(self, "fields")
        if name in fields:
            return fields[name]
        raise AttributeError(name)

    def dict(self) -> dict[str, Any]:
        """The user as a mapping (LangGraph's user objects offer the same)."""
        return {
            **self.fields,
            "identity": self.identity,
            "permissions": list(self.permissions),
            "display_name": self.display_name,
            "is_authenticated": True,
        }


TOKEN_ADMIN = AuthenticatedUser("admin", (ADMIN_PERMISSION,), "admin", unscoped=True)
"""Who presents the API token when ``auth.admin_token`` keeps it."""


def _permissions(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise InvalidUserError(f"permissions must be a list of strings, not {type(value).__name__}")
    return tuple(str(p) for p in value)


def user_of(returned: Any) -> AuthenticatedUser:
    """The user ``@auth.authenticate`` returned (``InvalidUserError`` saying what is wrong)."""
    if isinstance(returned, AuthenticatedUser):
        return returned
    if isinstance(returned, str):
        if not returned:
            raise InvalidUserError("the identity is an empty string")
        return AuthenticatedUser(returned, display_name=returned)
    if isinstance(returned, Mapping):
        identity = returned.get("identity")
        fields = dict(returned)
    else:
        identity = getattr(returned, "identity", None)
        fields = {}
        if identity is None:
            raise InvalidUserError(
                f"returned {type(returned).__name__}; return a str, a dict with 'identity' or a user"
            )
        returned = {
            "identity": identity,
            "permissions": getattr(returned, "permissions", ()),
            "display_name": getattr(returned, "display_name", identity),
        }
    if not isinstance(identity, str) or not identity:
        raise InvalidUserError("the user has no 'identity' (a non-empty string)")
    display = returned.get("display_name") or identity
    return AuthenticatedUser(identity, _permissions(returned.get("permissions")), str(display), fields)


REQUEST_USER: ContextVar[AuthenticatedUser | None] = ContextVar("deerflow_request_user", default=None)
"""The user of the request being served, for code that gets no request (the agent protocols'
runs): set by the front layer, in the request's own task context, only when ``auth`` is
configured."""
