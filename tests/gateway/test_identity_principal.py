"""With ``auth`` configured, the request's user is every extension's principal, and the API
token is off unless ``auth.admin_token`` keeps it (here it does not).

One Gateway for the module (SQLite), an ``auth.py`` of the test's own with two fixed users
(``alice``; ``root`` with the ``admin`` permission), and an extension whose routes read the
principal (``identity_routes_ext``)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sdk_server import SdkServer, sdk_server

pytestmark = pytest.mark.e2e

API_TOKEN = "api-token-0123456789abcdef-0123456789abcdef"
AUTH_PY = """
from langgraph_sdk import Auth

auth = Auth()
USERS = {"alice-key": "alice", "root-key": {"identity": "root", "permissions": ["admin", "ops"]}}


@auth.authenticate
async def who(headers):
    key = headers.get(b"x-user-key", b"").decode()
    if key not in USERS:
        raise Auth.exceptions.HTTPException(status_code=403, detail="unknown user key")
    return USERS[key]


@auth.on.threads.delete
async def only_admins_delete(ctx, value):
    return "admin" in ctx.user.permissions
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    directory = tmp_path_factory.mktemp("identity-principal")
    (directory / "users_auth.py").write_text(AUTH_PY)
    plugins = [{"name": "identity_routes", "use": "gateway.identity_routes_ext:install"}]
    extra = {"auth": {"path": "./users_auth.py:auth"}}
    with sdk_server(directory, plugins=plugins, sections=extra, api_token=API_TOKEN) as running:
        yield running


def get(server: SdkServer, path: str, **headers: str) -> httpx.Response:
    return httpx.get(server.url.removesuffix("/api") + path, headers=headers, timeout=10)


def test_extension_routes_see_the_user_and_admin_routes_refuse_the_others(server: SdkServer) -> None:
    alice = get(server, "/identity-test/whoami", **{"x-user-key": "alice-key"})
    assert alice.json() == {"user_id": "alice", "is_admin": False, "roles": []}
    root = get(server, "/identity-test/whoami", **{"x-user-key": "root-key"})
    assert root.json() == {"user_id": "root", "is_admin": True, "roles": ["admin", "ops"]}
    assert get(server, "/identity-test/admin", **{"x-user-key": "alice-key"}).status_code == 403
    assert get(server, "/identity-test/admin", **{"x-user-key": "root-key"}).json() == {"admin": "root"}


def test_the_handlers_status_answers_and_the_api_token_is_off(server: SdkServer) -> None:
    refused = get(server, "/identity-test/whoami", **{"x-user-key": "mallory"})
    assert (refused.status_code, refused.json()["detail"]) == (403, "unknown user key")
    with_token = get(server, "/identity-test/whoami", authorization=f"Bearer {API_TOKEN}")
    assert with_token.status_code == 403  # auth is set: the token alone is nobody


def test_a_handler_returning_false_is_403(server: SdkServer) -> None:
    alice = {"x-user-key": "alice-key"}
    made = httpx.post(f"{server.url}/threads", json={}, headers=alice, timeout=10).json()
    gone = httpx.delete(f"{server.url}/threads/{made['thread_id']}", headers=alice, timeout=10)
    assert gone.status_code == 403
    root = {"x-user-key": "root-key"}
    assert httpx.delete(f"{server.url}/threads/{made['thread_id']}", headers=root, timeout=10).status_code == 204


def test_a_browser_may_send_the_credential_and_docs_can_authorize(server: SdkServer) -> None:
    root = server.url.removesuffix("/api")
    preflight = httpx.options(
        f"{server.url}/threads/search",
        headers={
            "Origin": "http://localhost:3000",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
        timeout=10,
    )
    assert preflight.status_code == 200
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    schema = httpx.get(f"{root}/openapi.json", timeout=10).json()  # the docs need no user
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert schema["security"] == [{"bearer": []}]
    assert httpx.get(f"{root}/docs", timeout=10).status_code == 200


def test_the_operators_routes_are_for_administrators(server: SdkServer) -> None:
    for path in ("/api/extensions", "/api/extensions-config", "/metrics"):
        assert get(server, path, **{"x-user-key": "alice-key"}).status_code == 403, path
        assert get(server, path, **{"x-user-key": "root-key"}).status_code in (200, 404), path  # 404: metrics off
    config = httpx.put(f"{server.url}/extensions-config", json={}, headers={"x-user-key": "alice-key"}, timeout=10)
    assert config.status_code == 403


def test_a_runs_user_is_the_servers_word_never_the_callers() -> None:
    from deerflow_ext.gateway.routes.runs import _spec
    from deerflow_ext.gateway.schemas import RunCreate

    claimed = RunCreate.model_validate(
        {
            "context": {"langgraph_auth_user_id": "mallory", "user_id": "mallory", "topic": "x"},
            "config": {"configurable": {"langgraph_auth_user_id": "m", "user_id": "m"}},
        }
    )
    # The owner is the host's to write (the run's recorded user_id, set by the agent host).
    assert _spec(claimed, ("values",), {}).context == {"topic": "x"}
