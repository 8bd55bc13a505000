"""The store's semantic search through ``langgraph_sdk``, on a Gateway whose config.yaml has
``store: {index: {embed: "semantic_vocab:embed", dims: 8, fields: ["text"]}}`` (deterministic
test embeddings), on SQLite and PostgreSQL: the nearest item first with its ``score``, filters
and namespace prefixes respected, a put's ``index`` honoured, a graph's ``runtime.store``
searching alike, and the embedding model never run on the event loop. A bad ``embed`` stops
the Gateway with one line naming the file and field."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from platform_support import human

import semantic_vocab
from deerflow_ext.config.loading import ConfigError, load_app_config
from deerflow_ext.config.settings import Settings
from deerflow_ext.gateway import create_app
from gateway.sdk_server import SdkServer, sdk_server
from pg_support import PG_UNREACHABLE, fresh_database

pytestmark = pytest.mark.e2e

_INDEX = {"store": {"index": {"embed": "semantic_vocab:embed", "dims": semantic_vocab.DIMS, "fields": ["text"]}}}
_PLUGINS = [{"name": "recall", "use": "semantic_recall_ext:install"}]


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkServer]:
    directory: Path = tmp_path_factory.mktemp(f"semantic-{request.param}")
    if request.param == "sqlite":
        with sdk_server(directory, plugins=_PLUGINS, sections=_INDEX) as server:
            yield server
        return
    if PG_UNREACHABLE:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database() as name:
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
        with sdk_server(directory, database_url=url, plugins=_PLUGINS, sections=_INDEX) as server:
            yield server


def _root() -> str:
    return f"s{uuid.uuid4().hex[:10]}"


def test_nearest_first_with_score_filters_prefix_and_put_index(served: SdkServer) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    root = _root()
    client.store.put_item([root, "pets"], "cat", {"text": "a cat on the mat", "kind": "pet"})
    client.store.put_item([root, "pets"], "dog", {"text": "the dog and the dog", "kind": "pet"})
    client.store.put_item([root, "trips"], "train", {"text": "a train to the plane", "kind": "trip"})
    client.store.put_item([root, "trips"], "quiet", {"text": "dog dog dog", "kind": "trip"}, index=False)
    client.store.put_item([root, "food"], "titled", {"title": "pizza", "text": "cat"}, index=["title"])

    found = client.store.search_items([root], query="dog", limit=10)["items"]
    assert found[0]["key"] == "dog" and found[0]["score"] == pytest.approx(1.0, abs=1e-3)
    scored = [item["score"] for item in found if item["score"] is not None]
    assert scored == sorted(scored, reverse=True) and len(scored) == 4
    assert found[-1]["key"] == "quiet" and found[-1]["score"] is None  # index=False: never embedded

    assert client.store.search_items([root], query="pizza", limit=1)["items"][0]["key"] == "titled"
    trips = client.store.search_items([root], query="cat", filter={"kind": "trip"}, limit=10)["items"]
    assert {item["key"] for item in trips} == {"train", "quiet"}
    pets = client.store.search_items([root, "pets"], query="plane", limit=10)["items"]
    assert {item["key"] for item in pets} == {"cat", "dog"}
    second = client.store.search_items([root], query="dog", limit=1, offset=1)["items"]
    assert [item["key"] for item in second] == [found[1]["key"]]
    plain = client.store.search_items([root], limit=10)["items"]  # no query: newest first, no score
    assert plain[0]["key"] == "titled" and {item["score"] for item in plain} == {None}


def test_a_graph_searches_runtime_store_by_meaning(served: SdkServer) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    label = _root()
    client.store.put_item(["notes", label], "lunch", {"text": "pizza and pasta"})
    client.store.put_item(["notes", label], "commute", {"text": "the train"})
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], "lead_agent", input=human(f"recall:{label} which train"))
    hits = client.store.get_item(["recalled", label], "last")["value"]["hits"]
    assert [key for key, _ in hits] == ["commute", "lunch"] and hits[0][1] > hits[1][1]


async def test_embedding_never_runs_on_the_event_loop(served: SdkServer) -> None:
    """The model waits (``gated``) until the test has had ``/ok`` answered meanwhile."""
    aclient = get_client(url=served.url, api_key=None)
    semantic_vocab.ENTERED.clear()
    semantic_vocab.RELEASE.clear()
    semantic_vocab.BLOCKED.clear()
    root = _root()
    for call in (
        lambda: aclient.store.put_item([root], "k", {"text": "gated dog"}),
        lambda: aclient.store.search_items([root], query="gated cat"),
    ):
        semantic_vocab.ENTERED.clear()
        task = asyncio.ensure_future(call())
        assert await asyncio.to_thread(semantic_vocab.ENTERED.wait, 30)
        async with httpx.AsyncClient(base_url=served.url.removesuffix("/api"), timeout=60) as probe:
            answered = (await probe.get("/ok")).status_code
        semantic_vocab.RELEASE.set()
        await task
        semantic_vocab.RELEASE.clear()
        assert answered == 200 and semantic_vocab.BLOCKED == []
    assert threading.main_thread().name not in {name for _, name in semantic_vocab.CALLS[-2:]}


@pytest.mark.parametrize(
    ("index", "field", "says"),
    [
        ({"embed": "semantic_vocab:nothing_here", "dims": 8}, "store.index.embed", "init_embeddings"),
        ({"embed": "./missing.py:embed", "dims": 8}, "store.index.embed", "no file"),
        ({"embed": "semantic_vocab:DIMS", "dims": 8}, "store.index.embed", "not an Embeddings object or a function"),
        ({"embed": "semantic_vocab:embed", "dims": 8, "fields": ["$", "a[x"]}, "store.index.fields[1]", "JSON path"),
        ({"embed": "semantic_vocab:embed"}, "store.index.dims", "Field required"),
    ],
)
def test_a_bad_index_stops_startup_with_one_line_naming_file_and_field(
    tmp_path: Path, index: dict[str, Any], field: str, says: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"store:\n  index: {index}\n".replace("'", '"'), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        create_app(
            Settings(config=config, database_url=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"),
            config=load_app_config(config),
        )
    line = str(raised.value).splitlines()[0]
    assert line.startswith(f"{config}:") and field in line and says in line, line
