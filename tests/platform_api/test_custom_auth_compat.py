"""A LangGraph custom-auth file, written as LangGraph's tutorial writes one
(``tutorial_auth.py``), behaves on our Gateway as on LangGraph's server.

The same cases drive one server through ``langgraph_sdk``: normally our Gateway on SQLite
with ``auth: {path: ./tutorial_auth.py:auth}``; under ``nox -s compat`` instead ``langgraph dev``
with the same file as langgraph.json's ``auth.path`` (``DEERFLOW_COMPAT_AUTH_URL``). One case
per handler kind: ``@auth.authenticate`` (401), ``@auth.on.threads.create`` (the stamp
stored, the filter held: search, count, get), the global ``@auth.on`` (reads of a thread),
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
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError
from platform_support import COMPAT_URL

from gateway.sdk_server import sdk_server

pytestmark = pytest.mark.e2e

AUTH_FILE = Path(__file__).with_name("tutorial_auth.py")
COMPAT_AUTH_URL = os.environ.get("DEERFLOW_COMPAT_AUTH_URL")
"""``langgraph dev`` running ``tutorial_auth.py`` (``nox -s compat`` starts it)."""


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
