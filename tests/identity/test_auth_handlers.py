"""``identity``: an ``Auth`` loaded from config, ``@auth.authenticate`` called with what it
asks for, and ``@auth.on`` handlers picked and answered as LangGraph's server does."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from fastapi import HTTPException
from langgraph_sdk import Auth

from deerflow_ext.adapters.langgraph_sdk_private import registered_handlers
from deerflow_ext.config.schema import AuthConfig
from deerflow_ext.identity import AuthenticatedUser, Authenticator, AuthLoadError, Authorizer, build_identity_gate
from deerflow_ext.identity.authenticate import AuthenticationRefused
from deerflow_ext.identity.users import TOKEN_ADMIN, user_of

ALICE = AuthenticatedUser("alice", ("read",), "Alice", {"identity": "alice", "email": "a@example.com"})


def scope(path: str = "/api/threads", headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": b"limit=5",
        "headers": headers or [(b"authorization", b"Bearer t0k")],
    }


# ---------------------------------------------------------------------------- authorize


def layered() -> Authorizer:
    auth = Auth()

    @auth.on
    async def everything(ctx: Any, value: Any) -> Any:
        return {"who": "global"}

    @auth.on.threads
    async def threads(ctx: Any, value: Any) -> Any:
        return {"who": "threads"}

    @auth.on.threads.create
    async def create(ctx: Any, value: Any) -> Any:
        value["metadata"]["owner"] = ctx.user.identity
        assert (ctx.resource, ctx.action, ctx.permissions) == ("threads", "create", ["read"])
        assert ctx.user["email"] == ctx.user.email == "a@example.com"
        return {"who": "create"}

    @auth.on(resources="*", actions=["search"])
    async def searches(ctx: Any, value: Any) -> Any:
        return {"who": "any search"}

    return Authorizer(registered_handlers(auth))


async def test_the_most_specific_handler_wins() -> None:
    rules = layered()
    value: dict[str, Any] = {"metadata": {}}
    assert await rules.authorize(ALICE, "threads", "create", value) == {"who": "create"}
    assert value["metadata"] == {"owner": "alice"}  # the handler's change, for the caller to keep
    assert await rules.authorize(ALICE, "threads", "search", {}) == {"who": "threads"}
    assert await rules.authorize(ALICE, "crons", "search", {}) == {"who": "any search"}
    assert await rules.authorize(ALICE, "assistants", "read", {}) == {"who": "global"}
    assert await rules.authorize(TOKEN_ADMIN, "threads", "read", {}) is None  # the token's admin: unscoped


async def test_no_handler_allows_everything() -> None:
    assert await Authorizer(registered_handlers(Auth())).authorize(ALICE, "threads", "read", {}) is None


@pytest.mark.parametrize(
    ("returned", "status"),
    [
        (False, 403),
        (Auth.exceptions.HTTPException(status_code=418, detail="teapot"), 418),
        (RuntimeError("broken"), 403),
        ({"owner": {"$regex": "a.*"}}, 500),
        ("yes", 500),
    ],
)
async def test_refusals_answer_their_status(returned: Any, status: int) -> None:
    auth = Auth()

    @auth.on.threads.read
    async def read(ctx: Any, value: Any) -> Any:
        if isinstance(returned, Exception):
            raise returned
        return returned

    with pytest.raises(HTTPException) as refused:
        await Authorizer(registered_handlers(auth)).authorize(ALICE, "threads", "read", {})
    assert refused.value.status_code == status


async def test_true_and_none_allow_unfiltered() -> None:
    for answer in (True, None, {}):
        auth = Auth()

        @auth.on
        async def allow(ctx: Any, value: Any, answer: Any = answer) -> Any:
            return answer

        assert await Authorizer(registered_handlers(auth)).authorize(ALICE, "store", "put", {}) is None


# ---------------------------------------------------------------------------- authenticate


async def test_authenticate_gets_the_parameters_it_names() -> None:
    seen: dict[str, Any] = {}

    async def who(
        authorization: str | None, headers: dict[bytes, bytes], path: str, method: str, query_params: Any
    ) -> Any:
        seen.update(authorization=authorization, headers=headers, path=path, method=method, query=query_params)
        return {"identity": "alice", "permissions": ["admin"], "email": "a@example.com"}

    user = await Authenticator(who)(scope())
    assert isinstance(user, AuthenticatedUser)
    assert (user.identity, user.permissions, user.is_admin, user["email"]) == (
        "alice",
        ("admin",),
        True,
        "a@example.com",
    )
    assert seen == {
        "authorization": "Bearer t0k",
        "headers": {b"authorization": b"Bearer t0k"},
        "path": "/api/threads",
        "method": "POST",
        "query": {"limit": "5"},
    }


async def test_authenticate_answers_and_failures() -> None:
    async def teapot(request: Any) -> Any:
        raise Auth.exceptions.HTTPException(status_code=418, detail="short and stout", headers={"x-why": "tea"})

    async def broken() -> Any:
        raise RuntimeError("database down")

    async def nothing() -> Any:
        return None

    assert await Authenticator(teapot)(scope()) == AuthenticationRefused(418, "short and stout", {"x-why": "tea"})
    assert (await Authenticator(broken)(scope())).status == 401  # type: ignore[union-attr]
    assert (await Authenticator(nothing)(scope())).status == 401  # type: ignore[union-attr]


def test_users_of_every_shape() -> None:
    class Principal:
        identity = "carol"
        permissions = ("x",)
        display_name = "Carol"

    assert user_of("bob").identity == "bob"
    assert (user_of(Principal()).identity, user_of(Principal()).permissions) == ("carol", ("x",))
    assert user_of({"identity": "dan", "permissions": None}).permissions == ()
    for bad in ({"permissions": []}, {"identity": ""}, 42, {"identity": "e", "permissions": "admin"}):
        with pytest.raises(ValueError):
            user_of(bad)


def test_an_authenticator_wanting_an_unknown_parameter_or_sync_is_refused() -> None:
    async def odd(body: bytes) -> str:
        return "x"

    def sync(authorization: str) -> str:
        return "x"

    with pytest.raises(ValueError, match="takes 'body'"):
        Authenticator(odd)
    with pytest.raises(ValueError, match="async"):
        Authenticator(sync)


# ---------------------------------------------------------------------------- loading


def write(directory: Path, body: str) -> Path:
    config = directory / "config.yaml"
    config.write_text("{}")
    (directory / "my_auth.py").write_text(textwrap.dedent(body))
    return config


async def test_a_relative_file_loads_and_every_mistake_is_one_line(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        """
        from langgraph_sdk import Auth
        auth = Auth()
        not_auth = 3

        @auth.authenticate
        async def who(authorization):
            return "x"
        """,
    )
    gate = build_identity_gate(AuthConfig(path="./my_auth.py:auth"), config, None)
    assert isinstance(await gate.authenticate(scope(), None), AuthenticatedUser)
    problems = {
        "./missing.py:auth": "no file",
        "./my_auth.py:nope": "has no attribute 'nope'",
        "./my_auth.py:not_auth": "is a int, not a langgraph_sdk.Auth",
        "no_such_module_here:auth": "cannot import 'no_such_module_here'",
    }
    for path, problem in problems.items():
        with pytest.raises(AuthLoadError) as failed:
            build_identity_gate(AuthConfig(path=path), config, None)
        message = str(failed.value)
        assert message.startswith(f"{config}: auth.path: ") and problem in message and "\n" not in message
    with pytest.raises(AuthLoadError, match=r"auth\.admin_token"):
        build_identity_gate(AuthConfig(path="./my_auth.py:auth", admin_token=True), config, None)


def test_an_auth_without_authenticate_or_with_a_broken_import_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path, "from langgraph_sdk import Auth\nauth = Auth()\n")
    with pytest.raises(AuthLoadError, match=r"no @auth\.authenticate"):
        build_identity_gate(AuthConfig(path="./my_auth.py:auth"), config, None)
    config = write(tmp_path, "raise ImportError('jwt missing')\n")
    with pytest.raises(AuthLoadError, match=r"failed to import: .*jwt missing"):
        build_identity_gate(AuthConfig(path="./my_auth.py:auth"), config, None)


def test_the_config_key_names_a_module_and_attribute() -> None:
    for bad in ("auth.py", "./auth.py:", ":auth", "m:not-an-identifier"):
        with pytest.raises(ValueError, match="module:attr"):
            AuthConfig(path=bad)
