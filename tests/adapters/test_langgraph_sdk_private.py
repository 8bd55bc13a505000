"""``langgraph_sdk.Auth``'s handler tables, read where the Gateway reads them
(``adapters.langgraph_sdk_private``): an SDK upgrade that moves them fails here, by name."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from langgraph_sdk import Auth

from deerflow_ext.adapters.langgraph_sdk_private import registered_handlers

VERSION = f"langgraph-sdk {metadata.version('langgraph-sdk')}"


def test_every_kind_of_registration_is_read_back() -> None:
    auth = Auth()

    @auth.authenticate
    async def who(authorization: str | None) -> str:
        return "u"

    @auth.on
    async def everything(ctx: Any, value: Any) -> None:
        return None

    @auth.on.threads
    async def threads(ctx: Any, value: Any) -> None:
        return None

    @auth.on.threads.create
    async def create(ctx: Any, value: Any) -> None:
        return None

    @auth.on.store.put
    async def put(ctx: Any, value: Any) -> None:
        return None

    @auth.on(resources=["assistants", "crons"], actions=["read", "search"])
    async def reads(ctx: Any, value: Any) -> None:
        return None

    found = registered_handlers(auth)
    assert found.authenticate is who, VERSION
    assert found.global_handler is everything, VERSION
    expected = {
        ("threads", "*"): threads,
        ("threads", "create"): create,
        ("store", "put"): put,
        ("assistants", "read"): reads,
        ("assistants", "search"): reads,
        ("crons", "read"): reads,
        ("crons", "search"): reads,
    }
    assert dict(found.scoped) == expected, f"{VERSION}: Auth's handler table changed"


def test_an_empty_auth_has_nothing() -> None:
    found = registered_handlers(Auth())
    assert (found.authenticate, dict(found.scoped), found.global_handler) == (None, {}, None), VERSION
