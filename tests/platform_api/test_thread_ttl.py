"""Threads and store items that expire, and ``threads.prune``, driven by ``langgraph_sdk``
(sync and async) against our Gateway on a real uvicorn, on SQLite and PostgreSQL.

The sweeps run for real, every :data:`SWEEP_MINUTES` (about a fifth of a second), so a case
gives a thread or an item a time to live of a few hundred milliseconds and waits for two
sweeps of the Gateway's own sweeper to end (:func:`_two_sweeps`): the second began after the
time to live passed, so whatever it left is what one sweep leaves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import NotFoundError
from platform_support import COMPAT_URL, PLUGINS, human

from gateway.sdk_server import SdkServer, sdk_server
from pg_support import PG_UNREACHABLE, fresh_database

SWEEP_MINUTES = 0.003  # 0.18 s
SHORT = 0.002  # minutes: 0.12 s, less than one sweep interval
DEFAULT_TTL = 1000.0  # minutes: every thread of the module gets it unless it says otherwise

SECTIONS = {
    "checkpointer": {
        "ttl": {"strategy": "delete", "default_ttl": DEFAULT_TTL, "sweep_interval_minutes": SWEEP_MINUTES}
    },
    "store": {"ttl": {"default_ttl": SHORT, "refresh_on_read": False, "sweep_interval_minutes": SWEEP_MINUTES}},
}


class Served:
    def __init__(self, server: SdkServer, database_url: str) -> None:
        self.server = server
        self.url = server.url
        self.database_url = database_url

    def rows(self, sql: str, **params: Any) -> list[Any]:
        """Rows of the Gateway's database, read behind its back (what is really stored)."""
        url = self.database_url.replace("+aiosqlite", "").replace("+asyncpg", "+psycopg")
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                return list(conn.execute(sa.text(sql), params))
        finally:
            engine.dispose()

    def sweeps(self, kind: str = "thread") -> int:
        expiry = self.server.app.state.runtime.expiry
        return int((expiry.thread_sweeper if kind == "thread" else expiry.item_sweeper).completed)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if COMPAT_URL:
        pytest.skip("reads our Gateway's sweeper and database (nox -s compat drives LangGraph's server)")
    directory: Path = tmp_path_factory.mktemp(f"ttl-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{directory / 'deerflow.db'}"
        with sdk_server(directory, database_url=url, plugins=PLUGINS, sections=SECTIONS) as server:
            yield Served(server, url)
        return
    if PG_UNREACHABLE:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database() as name:
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
        with sdk_server(directory, database_url=url, plugins=PLUGINS, sections=SECTIONS) as server:
            yield Served(server, url)


@pytest.fixture
def client(served: Served) -> Any:
    return get_sync_client(url=served.url, api_key=None)


def _eventually(check: Any, seconds: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what}: did not happen within {seconds}s"
        time.sleep(0.05)


def _two_sweeps(served: Served, kind: str = "thread") -> None:
    """Wait until a whole sweep began after now (the one in flight may have begun before)."""
    seen = served.sweeps(kind)
    _eventually(lambda: served.sweeps(kind) >= seen + 2, what=f"two {kind} sweeps")


def _gone(client: Any, thread_id: str) -> bool:
    try:
        client.threads.get(thread_id)
    except NotFoundError:
        return True
    return False


def test_a_thread_past_its_ttl_is_gone_with_its_runs_and_checkpoints_after_one_sweep(
    served: Served, client: Any
) -> None:
    thread = client.threads.create(ttl={"strategy": "delete", "ttl": SHORT})
    thread_id = thread["thread_id"]
    assert thread["ttl"]["strategy"] == "delete" and thread["ttl"]["ttl_minutes"] == SHORT
    client.runs.wait(thread_id, "lead_agent", input=human("hello"))
    kept = client.threads.create()["thread_id"]  # the module's default: 1000 minutes
    time.sleep(SHORT * 60)
    _two_sweeps(served)
    assert _gone(client, thread_id)
    assert not served.rows("SELECT id FROM runs WHERE thread_id = :t", t=thread_id)
    # Its checkpoints went too: a new thread of the same id starts with no history.
    client.threads.create(thread_id=thread_id, ttl=DEFAULT_TTL)
    assert client.threads.get_history(thread_id) == []
    assert client.threads.get(kept)["thread_id"] == kept


def test_a_thread_gets_the_configured_default_ttl_and_shows_it_when_asked(served: Served, client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    ttl = client.threads.get(thread_id, include=["ttl"])["ttl"]
    assert ttl["strategy"] == "delete" and ttl["ttl_minutes"] == DEFAULT_TTL
    assert "ttl" not in client.threads.get(thread_id)
    client.threads.update(thread_id, metadata={"k": 1}, ttl={"strategy": "keep_latest", "ttl": 60})
    assert client.threads.get(thread_id, include=["ttl"])["ttl"]["strategy"] == "keep_latest"


def test_keep_latest_leaves_the_thread_with_its_newest_checkpoint_only(served: Served, client: Any) -> None:
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "lead_agent", input=human("one"))
    client.runs.wait(thread_id, "lead_agent", input=human("two"))
    before = client.threads.get_state(thread_id)
    assert len(client.threads.get_history(thread_id, limit=100)) > 1
    client.threads.update(thread_id, metadata={}, ttl={"strategy": "keep_latest", "ttl": SHORT})
    time.sleep(SHORT * 60)
    _two_sweeps(served)
    history = client.threads.get_history(thread_id, limit=100)
    assert len(history) == 1
    assert history[0]["checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]
    assert client.threads.get_state(thread_id)["values"]["messages"] == before["values"]["messages"]
    # The thread goes on from its state.
    client.runs.wait(thread_id, "lead_agent", input=human("three"))
    assert len(client.threads.get_state(thread_id)["values"]["messages"]) > len(before["values"]["messages"])


def test_a_thread_running_a_run_is_not_deleted_from_under_it(served: Served, client: Any) -> None:
    thread_id = client.threads.create(ttl=SHORT)["thread_id"]
    gate = served.server.gate()
    run = client.runs.create(thread_id, "lead_agent", input=human(f"gate:{gate}"))
    _eventually(lambda: client.runs.get(thread_id, run["run_id"])["status"] == "running", what="run started")
    time.sleep(SHORT * 60)
    _two_sweeps(served)
    assert client.threads.get(thread_id)["status"] == "busy"
    assert client.threads.prune([thread_id]) == {"pruned_count": 0}  # nor by a prune
    served.server.open_gate(gate)
    client.runs.join(thread_id, run["run_id"])
    assert client.runs.get(thread_id, run["run_id"])["status"] == "success"
    time.sleep(SHORT * 60)
    _two_sweeps(served)
    assert _gone(client, thread_id)


def test_prune_deletes_or_keeps_the_latest_state_with_the_async_client(served: Served) -> None:
    async def scenario() -> None:
        aclient = get_client(url=served.url, api_key=None)
        doomed = [(await aclient.threads.create())["thread_id"] for _ in range(2)]
        for thread_id in doomed:
            await aclient.runs.wait(thread_id, "lead_agent", input=human("hi"))
        result = await aclient.threads.prune([*doomed, "no-such-thread"])
        assert result == {"pruned_count": 2}
        for thread_id in doomed:
            with pytest.raises(NotFoundError):
                await aclient.threads.get(thread_id)
            assert not served.rows("SELECT id FROM runs WHERE thread_id = :t", t=thread_id)

        kept = (await aclient.threads.create())["thread_id"]
        await aclient.runs.wait(kept, "lead_agent", input=human("one"))
        await aclient.runs.wait(kept, "lead_agent", input=human("two"))
        state = await aclient.threads.get_state(kept)
        assert len(await aclient.threads.get_history(kept, limit=100)) > 1
        assert await aclient.threads.prune([kept], strategy="keep_latest") == {"pruned_count": 1}
        history = await aclient.threads.get_history(kept, limit=100)
        assert [h["checkpoint"]["checkpoint_id"] for h in history] == [state["checkpoint"]["checkpoint_id"]]
        assert (await aclient.threads.get(kept))["values"]["messages"] == state["values"]["messages"]

    asyncio.run(scenario())


def test_a_bad_ttl_or_prune_is_a_422_naming_the_field(served: Served) -> None:
    import httpx

    with httpx.Client(base_url=served.url) as http:
        for body in ({"ttl": {"ttl": -1}}, {"ttl": {"ttl": 5, "strategy": "archive"}}, {"ttl": "soon"}):
            answer = http.post("/threads", json=body)
            assert answer.status_code == 422 and "ttl" in answer.text, body
        answer = http.post("/threads/prune", json={"thread_ids": ["a"], "strategy": "shrink"})
        assert answer.status_code == 422 and "strategy" in answer.text
        thread_id = http.post("/threads", json={}).json()["thread_id"]
        answer = http.get(f"/threads/{thread_id}", params={"include": "everything"})
        assert answer.status_code == 422 and "include" in answer.text


def test_store_items_past_their_ttl_are_deleted_not_only_hidden(served: Served, client: Any) -> None:
    namespace = ["ttl", served.server.gate()]
    client.store.put_item(namespace, "default", {"v": 1})  # store.ttl.default_ttl: SHORT
    client.store.put_item(namespace, "long", {"v": 2}, ttl=1000)
    prefix = ".".join(namespace)
    assert len(served.rows("SELECT key FROM store_items WHERE prefix = :p", p=prefix)) == 2
    time.sleep(SHORT * 60)
    _two_sweeps(served, "item")
    assert [row.key for row in served.rows("SELECT key FROM store_items WHERE prefix = :p", p=prefix)] == ["long"]
    assert client.store.get_item(namespace, "long")["value"] == {"v": 2}
