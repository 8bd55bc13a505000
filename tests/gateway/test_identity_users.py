"""Two users, two JWTs, one Gateway running the shipped ``examples/auth/auth.py`` unchanged.

Everything goes through ``langgraph_sdk`` against a real Gateway on loopback, on SQLite and
on PostgreSQL (one server per database for the module): each user sees only their own
threads, runs, assistants, store items and crons; search and count agree; another user's
thread answers 404 wherever a thread id is taken; what the create handler stamps on the
metadata is stored; the authenticate handler's HTTPException answers its status; the API
token is refused unless ``auth.admin_token`` keeps it.
"""

from __future__ import annotations

import asyncio
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
from sdk_server import SdkServer, sdk_server

from mcp_support import is_error, mcp_session, text_of
from pg_support import PG_UNREACHABLE, fresh_database

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "auth" / "auth.py"
SECRET = "identity-test-secret-0123456789abcdef"
ADMIN_TOKEN = "admin-token-0123456789abcdef-0123456789"


def token(subject: str, *permissions: str) -> str:
    return jwt.encode({"sub": subject, "permissions": list(permissions)}, SECRET, algorithm="HS256")


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    directory = tmp_path_factory.mktemp(f"identity-{request.param}")
    shutil.copy(EXAMPLE, directory / "auth.py")  # loaded relative to the config file
    previous = os.environ.get("AUTH_JWT_SECRET")
    os.environ["AUTH_JWT_SECRET"] = SECRET
    auth = {"auth": {"path": "./auth.py:auth", "admin_token": True}}
    plugins = [{"name": "identity_routes", "use": "gateway.identity_routes_ext:install"}]
    try:
        if request.param == "sqlite":
            with sdk_server(directory, plugins=plugins, sections=auth, api_token=ADMIN_TOKEN) as running:
                yield running
            return
        if PG_UNREACHABLE:
            pytest.skip(PG_UNREACHABLE)
        with fresh_database() as name:
            url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
            with sdk_server(
                directory, database_url=url, plugins=plugins, sections=auth, api_token=ADMIN_TOKEN
            ) as running:
                yield running
    finally:
        if previous is None:
            os.environ.pop("AUTH_JWT_SECRET", None)
        else:
            os.environ["AUTH_JWT_SECRET"] = previous


def client_of(server: SdkServer, bearer: str) -> Any:
    return get_sync_client(url=server.url, api_key=None, headers={"Authorization": f"Bearer {bearer}"})


@pytest.fixture(scope="module")
def alice(server: SdkServer) -> Any:
    return client_of(server, token("alice"))


@pytest.fixture(scope="module")
def bob(server: SdkServer) -> Any:
    return client_of(server, token("bob"))


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_each_user_sees_only_their_threads_and_counts_agree(alice: Any, bob: Any) -> None:
    tag = uuid.uuid4().hex
    mine = [alice.threads.create(metadata={"suite": tag, "n": n}) for n in range(3)]
    theirs = bob.threads.create(metadata={"suite": tag, "n": 9})
    assert all(t["metadata"]["owner"] == "alice" for t in mine)  # the create handler's stamp, stored
    assert alice.threads.get(mine[0]["thread_id"])["metadata"] == {"suite": tag, "n": 0, "owner": "alice"}

    found = alice.threads.search(metadata={"suite": tag}, limit=100)
    assert {t["thread_id"] for t in found} == {t["thread_id"] for t in mine}
    assert alice.threads.count(metadata={"suite": tag}) == 3
    assert [t["thread_id"] for t in bob.threads.search(metadata={"suite": tag})] == [theirs["thread_id"]]
    assert bob.threads.count(metadata={"suite": tag}) == 1
    # Pages are counted over what the user may see: two pages of two hold alice's three.
    pages = [alice.threads.search(metadata={"suite": tag}, limit=2, offset=o) for o in (0, 2)]
    assert [len(p) for p in pages] == [2, 1]
    # A client cannot widen its own filter: asking for bob's owner finds none of his (the
    # example's handler rewrites the search's metadata to her own, as on LangGraph's server).
    asked = alice.threads.search(metadata={"owner": "bob", "suite": tag}, limit=100)
    assert {t["metadata"]["owner"] for t in asked} <= {"alice"} and theirs["thread_id"] not in str(asked)


def test_another_users_thread_is_not_found_anywhere(server: SdkServer, alice: Any, bob: Any) -> None:
    thread = alice.threads.create()
    thread_id = thread["thread_id"]
    alice.runs.wait(thread_id, "lead_agent", input=human("hello"))
    run = alice.runs.list(thread_id)[0]
    run_id = run["run_id"]

    attempts = {
        "get": lambda: bob.threads.get(thread_id),
        "state": lambda: bob.threads.get_state(thread_id),
        "history": lambda: bob.threads.get_history(thread_id),
        "copy": lambda: bob.threads.copy(thread_id),
        "update": lambda: bob.threads.update(thread_id, metadata={"owner": "bob"}),
        "runs": lambda: bob.runs.list(thread_id),
        "run": lambda: bob.runs.get(thread_id, run_id),
        "create run": lambda: bob.runs.create(thread_id, "lead_agent", input=human("mine now")),
        "join": lambda: bob.runs.join(thread_id, run_id),
        "join_stream": lambda: list(bob.runs.join_stream(thread_id, run_id)),
        "cancel": lambda: bob.runs.cancel(thread_id, run_id),
        "delete run": lambda: bob.runs.delete(thread_id, run_id),
        "delete": lambda: bob.threads.delete(thread_id),
    }
    for name, attempt in attempts.items():
        with pytest.raises((NotFoundError, httpx.HTTPStatusError)) as refused:
            attempt()
            pytest.fail(f"{name}: bob reached alice's thread")
        status = getattr(refused.value, "status_code", None) or refused.value.response.status_code  # type: ignore[union-attr]
        assert status == 404, name
    # Nothing of it changed: alice still reads her thread, its owner and its run.
    assert alice.threads.get(thread_id)["metadata"]["owner"] == "alice"
    assert [r["run_id"] for r in alice.runs.list(thread_id)] == [run_id]
    assert alice.threads.get_state(thread_id)["values"]["messages"][-1]["type"] == "ai"


def agent_runs(server: SdkServer, subject: str, **step: Any) -> dict[str, Any]:
    """One step of ``subject``'s agent-run handle, through the extension's route."""
    url = server.url.removesuffix("/api") + "/identity-test/agent-runs"
    answer = httpx.post(url, json=step, headers={"Authorization": f"Bearer {token(subject)}"}, timeout=90)
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def test_an_extensions_agent_runs_go_through_the_users_handlers(server: SdkServer, alice: Any, bob: Any) -> None:
    """The handle scopes threads as the routes do (``threads.create`` stamps, ``threads.read``
    filters, ``threads.create_run`` admits), and its runs have the one owner rule."""
    made = agent_runs(server, "alice", step="create", metadata={"topic": "handle"})["thread_id"]
    assert alice.threads.get(made)["metadata"]["owner"] == "alice"  # the create handler's stamp
    with pytest.raises(NotFoundError):
        bob.threads.get(made)
    assert agent_runs(server, "bob", step="start", thread_id=made) == {"refused": 404}
    over_http = alice.threads.create()["thread_id"]  # a thread alice made herself is hers to the handle
    ran = agent_runs(server, "alice", step="start", thread_id=over_http)
    assert ran["status"] == "success"  # the handle's get read runs.user_id == "alice"
    run = alice.runs.get(over_http, ran["run_id"])
    assert run["metadata"]["langgraph_auth_user_id"] == "alice"
    assert agent_runs(server, "bob", step="start", thread_id=over_http) == {"refused": 404}


def test_runs_record_their_owner_and_a_new_thread_is_the_runs_user(alice: Any, bob: Any) -> None:
    thread_id = str(uuid.uuid4())
    alice.runs.wait(thread_id, "lead_agent", input=human("make it"), if_not_exists="create")
    assert alice.threads.get(thread_id)["metadata"]["owner"] == "alice"
    run = alice.runs.list(thread_id)[0]
    assert run["metadata"]["langgraph_auth_user_id"] == "alice"
    with pytest.raises(NotFoundError):
        bob.threads.get(thread_id)
    copy = alice.threads.copy(thread_id)
    assert copy["metadata"]["owner"] == "alice"
    assert thread_id not in {t["thread_id"] for t in bob.threads.search(metadata={"owner": "alice"}, limit=100)}


def test_assistants_store_and_crons_are_each_users_own(alice: Any, bob: Any) -> None:
    made = alice.assistants.create(graph_id="lead_agent", name=f"a-{uuid.uuid4().hex[:6]}")
    assert made["metadata"]["owner"] == "alice"
    assert made["assistant_id"] in {a["assistant_id"] for a in alice.assistants.search(limit=100)}
    assert made["assistant_id"] not in {a["assistant_id"] for a in bob.assistants.search(limit=100)}
    assert alice.assistants.count() == len(alice.assistants.search(limit=100))
    with pytest.raises(NotFoundError):
        bob.assistants.get(made["assistant_id"])
    with pytest.raises(NotFoundError):
        bob.assistants.update(made["assistant_id"], metadata={"x": 1})
    with pytest.raises(NotFoundError):
        bob.assistants.delete(made["assistant_id"])

    alice.store.put_item(["notes"], "k", {"text": "alice's"})
    bob.store.put_item(["notes"], "k", {"text": "bob's"})
    assert alice.store.get_item(["notes"], "k")["value"] == {"text": "alice's"}
    assert bob.store.get_item(["notes"], "k")["value"] == {"text": "bob's"}
    found = alice.store.search_items(["notes"])["items"]
    assert [(tuple(i["namespace"]), i["value"]["text"]) for i in found] == [(("alice", "notes"), "alice's")]
    assert alice.store.list_namespaces()["namespaces"] == [["alice", "notes"]]
    bob.store.delete_item(["notes"], "k")
    assert alice.store.get_item(["notes"], "k") is not None  # bob's delete was his own item's

    cron = alice.crons.create("lead_agent", schedule="0 0 1 1 *", input=human("yearly"))
    assert cron["metadata"]["owner"] == "alice"
    assert [c["cron_id"] for c in alice.crons.search()] == [cron["cron_id"]]
    assert bob.crons.search() == []
    assert (alice.crons.count(), bob.crons.count()) == (1, 0)
    with pytest.raises(NotFoundError):
        bob.crons.delete(cron["cron_id"])
    alice.crons.delete(cron["cron_id"])


def test_authentication_answers_the_handlers_status_and_the_token_is_an_admins(server: SdkServer) -> None:
    base = server.url
    assert httpx.post(f"{base}/threads/search", json={}, timeout=10).status_code == 401
    bad = httpx.post(f"{base}/threads/search", json={}, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert bad.status_code == 401 and "invalid token" in bad.json()["detail"]
    assert httpx.get(f"{base.removesuffix('/api')}/health", timeout=10).status_code == 200  # liveness: no user
    # auth.admin_token keeps the API token as an administrator's credential: no handler scopes it.
    admin = httpx.post(f"{base}/threads/count", json={}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10)
    assert admin.status_code == 200
    alice_count = client_of(server, token("alice")).threads.count()
    assert admin.json() >= alice_count + 1  # bob's threads too


def test_an_a2a_message_runs_as_its_user(server: SdkServer, alice: Any, bob: Any) -> None:
    """The agent protocols hand no request to the runs they start; the run is still the
    caller's (``protocol_runs``): a message on another user's thread is refused, one on a
    new context makes a thread of the caller's own."""

    def send(user: str, context_id: str) -> httpx.Response:
        message = {
            "role": "user",
            "parts": [{"kind": "text", "text": "hello"}],
            "messageId": str(uuid.uuid4()),
            "contextId": context_id,
        }
        return httpx.post(
            f"{server.url}/a2a/lead_agent",
            json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}},
            headers={"Authorization": f"Bearer {token(user)}"},
            timeout=30,
        )

    theirs = alice.threads.create()["thread_id"]
    refused = send("bob", theirs)
    assert "result" not in refused.json(), refused.text
    assert alice.runs.list(theirs) == []
    context = str(uuid.uuid4())
    done = send("bob", context).json()
    assert done["result"]["status"]["state"] == "completed", done
    assert bob.threads.get(context)["metadata"]["owner"] == "bob"
    assert bob.runs.list(context)[0]["metadata"]["langgraph_auth_user_id"] == "bob"


def a2a_call(server: SdkServer, user: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(
        f"{server.url}/a2a/lead_agent",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"Authorization": f"Bearer {token(user)}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def test_an_a2a_task_is_found_by_its_user_only(server: SdkServer, alice: Any) -> None:
    """``tasks/get`` and ``tasks/cancel`` name a task by its id alone: another user's task
    answers A2A's task-not-found, as the run routes answer 404 for another user's run."""
    message = {"role": "user", "parts": [{"kind": "text", "text": "hello"}], "messageId": str(uuid.uuid4())}
    sent = a2a_call(server, "alice", "message/send", {"message": message})
    task_id = sent["result"]["id"]
    mine = a2a_call(server, "alice", "tasks/get", {"id": task_id})
    assert mine["result"]["status"]["state"] == "completed", mine
    for method in ("tasks/get", "tasks/cancel"):
        theirs = a2a_call(server, "bob", method, {"id": task_id})
        assert "result" not in theirs and theirs["error"]["code"] == -32001, theirs  # TaskNotFoundError
    assert a2a_call(server, "bob", "tasks/get", {"id": str(uuid.uuid4())})["error"]["code"] == -32001
    # Bob's cancel stopped nothing of alice's: her task is as it was.
    assert a2a_call(server, "alice", "tasks/get", {"id": task_id})["result"]["status"]["state"] == "completed"
    # A follow-up naming her task is refused to him as well (it reads the task first).
    follow = dict(message, messageId=str(uuid.uuid4()), taskId=task_id)
    assert "result" not in a2a_call(server, "bob", "message/send", {"message": follow})


def test_an_mcp_call_on_another_users_thread_is_refused(server: SdkServer, alice: Any, bob: Any) -> None:
    theirs = alice.threads.create()["thread_id"]

    async def call(user: str, arguments: dict[str, Any]) -> Any:
        headers = {"Authorization": f"Bearer {token(user)}"}
        async with mcp_session(f"{server.url}/mcp", headers=headers) as session:
            return await session.call_tool("lead_agent", arguments)

    refused = asyncio.run(call("bob", {"messages": "hello", "thread_id": theirs}))
    assert is_error(refused) and "not found" in text_of(refused), text_of(refused)
    assert alice.runs.list(theirs) == []
    mine = str(uuid.uuid4())
    answered = asyncio.run(call("bob", {"messages": "hello", "thread_id": mine}))
    assert not is_error(answered), text_of(answered)
    assert bob.threads.get(mine)["metadata"]["owner"] == "bob"
    assert [r["metadata"]["langgraph_auth_user_id"] for r in bob.runs.list(mine)] == ["bob"]
    with pytest.raises(NotFoundError):
        alice.threads.get(mine)
