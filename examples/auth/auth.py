"""LangGraph custom auth with JWTs signed by a shared secret: users own what they create.

The same file runs on LangGraph's server (``"auth": {"path": "./auth.py:auth"}`` in
``langgraph.json``) and on this Gateway (``auth: {path: ./auth.py:auth}`` in config.yaml).
Tokens are HS256 JWTs signed with ``AUTH_JWT_SECRET``; ``sub`` is the user and the optional
``permissions`` claim their permissions (``"admin"`` makes an administrator of the
Gateway). PyJWT checks the signature, ``exp`` and the algorithm.

Every thread, assistant and cron a user creates is stamped ``metadata["owner"]``, and every
read, search, update and delete is filtered to the caller's own; store namespaces are put
under the caller's identity.

Issue a token (for a try-out)::

    python -c "import jwt; print(jwt.encode({'sub': 'alice'}, 'change-me', algorithm='HS256'))"
"""

from __future__ import annotations

import os
from typing import Any

import jwt
from langgraph_sdk import Auth

auth = Auth()

_ALGORITHMS = ["HS256"]


def _secret() -> str:
    secret = os.environ.get("AUTH_JWT_SECRET")
    if not secret:
        raise Auth.exceptions.HTTPException(status_code=500, detail="AUTH_JWT_SECRET is not set on the server")
    return secret


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The bearer token's subject and permissions; 401 for a missing, bad or expired token."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Auth.exceptions.HTTPException(status_code=401, detail="send Authorization: Bearer <JWT>")
    try:
        claims = jwt.decode(token, _secret(), algorithms=_ALGORITHMS, options={"require": ["sub"]})
    except jwt.PyJWTError as exc:
        raise Auth.exceptions.HTTPException(status_code=401, detail=f"invalid token: {exc}") from exc
    return {"identity": str(claims["sub"]), "permissions": list(claims.get("permissions", []))}


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Auth.types.FilterType:
    """Threads, runs, assistants and crons: stamp the owner on what is created, and show
    each user only what they own."""
    owner = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata.update(owner)
    return owner


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    """The store: every namespace starts with the caller's identity."""
    namespace = tuple(value.get("namespace") or ())
    if not namespace or namespace[0] != ctx.user.identity:
        value["namespace"] = (ctx.user.identity, *namespace)
