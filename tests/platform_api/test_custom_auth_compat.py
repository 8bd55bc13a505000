"""LangGraph custom-auth files behave on our Gateway as on LangGraph's server: one written as
LangGraph's tutorial writes one (``tutorial_auth.py``: a token table) and the shipped JWT
example (``examples/auth/auth.py``: HS256 tokens, PyJWT).

The same cases drive one server per file through ``langgraph_sdk``: normally our Gateway on
SQLite with ``auth: {path: ./<file>:auth}``; under ``nox -s compat`` instead ``langgraph dev``
with the same file as langgraph.json's ``auth.path`` (``DEERFLOW_COMPAT_AUTH_URL``,
``DEERFLOW_COMPAT_JWT_URL``, the JWT secret in ``AUTH_JWT_SECRET``). One case per handler
kind: ``@auth.authenticate`` (401), ``@auth.on.threads.create`` (the stamp stored, the filter
held: search, count, get), the global ``@auth.on`` (reads and updates of a thread),
``@auth.on.store`` (the namespace rewritten), a handler answering ``False`` (403).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError
from platform_support import COMPAT_URL

from gateway.sdk_server import sdk_server

pytestmark = pytest.mark.e2e

AUTH_FILE = Path(__file__).with_name("tutorial_auth.py")
JWT_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "auth" / "auth.py"
COMPAT_AUTH_URL = os.environ.get("DEERFLOW_COMPAT_AUTH_URL")
"""``langgraph dev`` running ``tutorial_auth.py`` (``nox -s compat`` starts it)."""
COMPAT_JWT_URL = os.environ.get("DEERFLOW_COMPAT_JWT_URL")
"""``langgraph dev`` running ``examples/auth/auth.py`` (``nox -s compat`` starts it)."""
OUR_SECRET = "custom-auth-compat-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(kind, API root): ``peer`` under ``nox -s compat``, else our Gateway on SQLite."""
    if COMPAT_URL:
        if not COMPAT_AUTH_URL:
            pytest.skip("DEERFLOW_COMPAT_AUTH_URL names no langgraph dev with the auth file")
        yield "peer", COMPAT_AUTH_URL.rstrip("/")
        return
    directory = tmp_path_factory.mktemp("tutorial-auth")
    shutil.copy(AUTH_FILE, directory / AUTH_FILE.name)  # loaded relative to config.yaml
    with sdk_server(directory, sections={"auth": {"path": f"./{AUTH_FILE.name}:auth"}}) as served:
        yield "sqlite", served.url


def as_user(server: tuple[str, str], token: str) -> Any:
    return get_sync_client(url=server[1], api_key=None, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture(scope="module")
def ada(server: tuple[str, str]) -> Any:
    return as_user(server, "token-ada")


@pytest.fixture(scope="module")
def brian(server: tuple[str, str]) -> Any:
    return as_user(server, "token-brian")


def test_an_unknown_or_missing_token_is_401(server: tuple[str, str]) -> None:
    for headers in ({"Authorization": "Bearer token-nobody"}, {}):
        answer = httpx.post(f"{server[1]}/threads/search", json={}, headers=headers, timeout=10)
        assert answer.status_code == 401, answer.text
        assert "unknown bearer token" in answer.text


def test_the_create_handlers_stamp_is_stored(ada: Any) -> None:
    thread = ada.threads.create(metadata={"topic": "stamps"})
    expected = {"topic": "stamps", "owner": "ada", "created_by": "Ada"}
    assert {k: thread["metadata"].get(k) for k in expected} == expected
    assert {k: ada.threads.get(thread["thread_id"])["metadata"].get(k) for k in expected} == expected


def test_each_user_sees_only_their_own_threads(ada: Any, brian: Any) -> None:
    tag = uuid.uuid4().hex
    hers = [ada.threads.create(metadata={"suite": tag})["thread_id"] for _ in range(2)]
    his = brian.threads.create(metadata={"suite": tag})["thread_id"]
    assert {t["thread_id"] for t in ada.threads.search(metadata={"suite": tag})} == set(hers)
    assert [t["thread_id"] for t in brian.threads.search(metadata={"suite": tag})] == [his]
    assert ada.threads.count(metadata={"suite": tag}) == 2
    assert brian.threads.count(metadata={"suite": tag}) == 1
    with pytest.raises(NotFoundError):
        brian.threads.get(hers[0])
    with pytest.raises(NotFoundError):
        brian.threads.get_state(hers[0])
    with pytest.raises(NotFoundError):
        brian.threads.update(hers[0], metadata={"taken": True})
    assert "taken" not in ada.threads.get(hers[0])["metadata"]


def test_the_store_handler_puts_each_namespace_under_its_user(ada: Any, brian: Any) -> None:
    key = uuid.uuid4().hex
    ada.store.put_item(["notes"], key, {"text": "ada's"})
    brian.store.put_item(["notes"], key, {"text": "brian's"})
    # Each asked for ("notes",) and got their own: the handler rewrote both namespaces.
    assert ada.store.get_item(["notes"], key)["value"] == {"text": "ada's"}
    assert brian.store.get_item(["notes"], key)["value"] == {"text": "brian's"}
    stored = ada.store.get_item(["ada", "notes"], key)
    assert stored["namespace"] == ["ada", "notes"] and stored["value"] == {"text": "ada's"}
    found = brian.store.search_items(["notes"], limit=100)["items"]
    assert [i["value"] for i in found if i["key"] == key] == [{"text": "brian's"}]


def test_a_handler_answering_false_is_403(server: tuple[str, str], ada: Any) -> None:
    thread = ada.threads.create()["thread_id"]
    answer = httpx.delete(f"{server[1]}/threads/{thread}", headers={"Authorization": "Bearer token-ada"}, timeout=10)
    assert answer.status_code == 403, answer.text
    assert ada.threads.get(thread)["thread_id"] == thread  # still there


# -- the shipped JWT example -----------------------------------------------------------


@pytest.fixture(scope="module")
def jwt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(kind, API root, the secret its tokens are signed with)."""
    if COMPAT_URL:
        secret = os.environ.get("AUTH_JWT_SECRET")
        if not COMPAT_JWT_URL or not secret:
            pytest.skip("DEERFLOW_COMPAT_JWT_URL and AUTH_JWT_SECRET name no langgraph dev with the JWT example")
        yield "peer", COMPAT_JWT_URL.rstrip("/"), secret
        return
    directory = tmp_path_factory.mktemp("jwt-auth")
    shutil.copy(JWT_EXAMPLE, directory / "auth.py")
    previous = os.environ.get("AUTH_JWT_SECRET")
    os.environ["AUTH_JWT_SECRET"] = OUR_SECRET  # read by the example on each request
    try:
        with sdk_server(directory, sections={"auth": {"path": "./auth.py:auth"}}) as served:
            yield "sqlite", served.url, OUR_SECRET
    finally:
        if previous is None:
            os.environ.pop("AUTH_JWT_SECRET", None)
        else:
            os.environ["AUTH_JWT_SECRET"] = previous


def signed(jwt_server: tuple[str, str, str], subject: str, **claims: Any) -> Any:
    token = jwt.encode({"sub": subject, **claims}, jwt_server[2], algorithm="HS256")
    return get_sync_client(url=jwt_server[1], api_key=None, headers={"Authorization": f"Bearer {token}"})


def test_the_jwt_example_refuses_a_bad_or_expired_token(jwt_server: tuple[str, str, str]) -> None:
    forged = jwt.encode({"sub": "grace"}, "not-the-secret-0123456789abcdef-0123", algorithm="HS256")
    expired = jwt.encode({"sub": "grace", "exp": 1}, jwt_server[2], algorithm="HS256")
    for token in (forged, expired, "not-a-jwt"):
        headers = {"Authorization": f"Bearer {token}"}
        answer = httpx.post(f"{jwt_server[1]}/threads/search", json={}, headers=headers, timeout=10)
        assert answer.status_code == 401, answer.text
        assert "invalid token" in answer.text


def test_the_jwt_example_keeps_each_users_threads_and_store_their_own(jwt_server: tuple[str, str, str]) -> None:
    grace, linus = signed(jwt_server, "grace"), signed(jwt_server, "linus")
    tag = uuid.uuid4().hex
    hers = grace.threads.create(metadata={"suite": tag})
    assert hers["metadata"]["owner"] == "grace"
    his = linus.threads.create(metadata={"suite": tag})["thread_id"]
    assert [t["thread_id"] for t in grace.threads.search(metadata={"suite": tag})] == [hers["thread_id"]]
    assert linus.threads.count(metadata={"suite": tag}) == 1
    with pytest.raises(NotFoundError):
        grace.threads.get(his)
    key = uuid.uuid4().hex
    grace.store.put_item(["prefs"], key, {"theme": "dark"})
    assert grace.store.get_item(["grace", "prefs"], key)["value"] == {"theme": "dark"}
    assert linus.store.get_item(["grace", "prefs"], key) is None  # read as ("linus", "grace", "prefs")
