"""The ``auth.py`` ``server_instructions.py --auth`` serves: every request is one user, and the
handlers are the owner pattern of LangGraph's tutorial (stamp ``owner`` on what is created,
filter every read to it), so a counted run pays what a real deployment's handlers cost
(the authenticate call, a handler per route, the filtered thread read)."""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

auth = Auth()


@auth.authenticate
async def who(authorization: str | None) -> str:
    return "bench"


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Auth.types.FilterType:
    owner = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata.update(owner)
    return owner
