"""A custom-auth file written the way LangGraph's "custom auth" tutorial writes one.

It is loaded unchanged by both servers of ``test_custom_auth_compat.py``: by our Gateway
(``auth: {path: ./tutorial_auth.py:auth}`` in config.yaml) and by ``langgraph dev``
(``"auth": {"path": ...}`` in langgraph.json). Users come from a fixed token table; a thread's
creator is stamped ``metadata["owner"]`` and every other operation is held to the caller's own;
store namespaces are put under the caller's identity; nobody deletes a thread (the handler says
``False``).
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

TOKENS: dict[str, dict[str, str]] = {
    "token-ada": {"identity": "ada", "display_name": "Ada"},
    "token-brian": {"identity": "brian", "display_name": "Brian"},
}
"""Bearer token -> user. A real deployment asks its identity provider instead."""

auth = Auth()


@auth.authenticate
async def who_is_calling(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The user the bearer token names; 401 for any other header."""
    scheme, _, token = (authorization or "").partition(" ")
    user = TOKENS.get(token) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown bearer token")
    return {"identity": user["identity"], "display_name": user["display_name"], "permissions": []}


@auth.on
async def only_your_own(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Auth.types.FilterType:
    """Every resource without a handler of its own: mark what is created, see only what is yours."""
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.threads.create
async def stamp_new_thread(
    ctx: Auth.types.AuthContext, value: Auth.types.on.threads.create.value
) -> Auth.types.FilterType:
    """A new thread is its creator's: the stamp is stored with it."""
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.identity
    metadata["created_by"] = ctx.user.display_name
    return {"owner": ctx.user.identity}


@auth.on.threads.delete
async def keep_every_thread(ctx: Auth.types.AuthContext, value: Auth.types.on.threads.delete.value) -> bool:
    """Threads are kept: a delete is refused (403) whoever asks."""
    return False


@auth.on.store
async def your_namespace(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    """The store: every namespace is put under the caller's identity."""
    namespace = tuple(value.get("namespace") or ())
    if not namespace or namespace[0] != ctx.user.identity:
        value["namespace"] = (ctx.user.identity, *namespace)
