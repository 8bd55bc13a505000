"""The store through ``client.store``: items put, read, searched, listed and deleted, bad
input refused with a 422 naming the field, items kept across a restart, and the same items
read by a graph through ``runtime.store`` (the ``store_reader_ext`` middleware)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from platform_support import PLUGINS, Platform, human

from gateway.sdk_server import SdkServer, sdk_server
from pg_support import fresh_database

pytestmark = pytest.mark.e2e


def _root() -> str:
    """A namespace root of the case's own: the suite's server is shared by a module's cases."""
    return f"r{uuid.uuid4().hex[:10]}"


def test_put_get_replace_and_delete_through_the_sync_client(client: Any, platform: Platform) -> None:
    root = _root()
    assert client.store.put_item([root, "u1"], "prefs", {"theme": "dark"}) is None
    item = client.store.get_item([root, "u1"], "prefs")
    assert (item["namespace"], item["key"], item["value"]) == ([root, "u1"], "prefs", {"theme": "dark"})
    # Made at once (LangGraph's server stamps the two a few microseconds apart).
    made, updated = (datetime.fromisoformat(item[k]) for k in ("created_at", "updated_at"))
    assert timedelta(0) <= updated - made < timedelta(seconds=1)

    client.store.put_item([root, "u1"], "prefs", {"theme": "light"})
    replaced = client.store.get_item([root, "u1"], "prefs")
    assert replaced["value"] == {"theme": "light"}
    if platform.is_peer:
        # A divergence: ours keeps a replaced item's created_at (as LangGraph's PostgreSQL
        # store does); LangGraph's in-memory server stamps it anew.
        assert replaced["created_at"] > item["created_at"]
    else:
        assert replaced["created_at"] == item["created_at"]

    client.store.delete_item([root, "u1"], "prefs")
    assert client.store.get_item([root, "u1"], "prefs") is None
    client.store.delete_item([root, "u1"], "prefs")  # already gone: no error


async def test_ttl_index_and_query_are_accepted(aclient: Any) -> None:
    root = _root()
    # A time to live (minutes) and an index choice on the put, refresh_ttl on the reads: the
    # item is there until it expires; with no vector index, ``query`` is ignored.
    await aclient.store.put_item([root], "k", {"v": 1}, index=False, ttl=5)
    assert (await aclient.store.get_item([root], "k", refresh_ttl=False))["value"] == {"v": 1}
    assert (await aclient.store.get_item([root], "k", refresh_ttl=True))["value"] == {"v": 1}
    found = await aclient.store.search_items([root], query="anything at all", refresh_ttl=False)
    assert [item["key"] for item in found["items"]] == ["k"]


async def test_search_by_prefix_filter_and_pages_through_the_async_client(aclient: Any, platform: Platform) -> None:
    root = _root()
    for i in range(6):
        await aclient.store.put_item([root, "a" if i % 2 == 0 else "b"], f"k{i}", {"i": i, "kind": "note"})
    await aclient.store.put_item([f"{root}x"], "elsewhere", {"i": 100, "kind": "note"})  # shares text, not a label

    everything = (await aclient.store.search_items([root], limit=50))["items"]
    order = [item["key"] for item in everything]
    assert sorted(order) == [f"k{i}" for i in range(6)]
    if not platform.is_peer:  # LangGraph promises no order of a search; ours answers newest first
        assert order == [f"k{i}" for i in reversed(range(6))]
    assert {tuple(item["namespace"]) for item in everything} == {(root, "a"), (root, "b")}

    def keys(found: dict[str, Any]) -> list[str]:
        return [item["key"] for item in found["items"]]

    def among(chosen: set[str]) -> list[str]:
        """The chosen keys in the server's order of the search."""
        return [key for key in order if key in chosen]

    assert keys(await aclient.store.search_items([root, "a"])) == among({"k0", "k2", "k4"})
    ranged = await aclient.store.search_items([root], filter={"i": {"$gte": 2, "$lt": 5}})
    assert keys(ranged) == among({"k2", "k3", "k4"})
    assert keys(await aclient.store.search_items([root], filter={"i": 3})) == ["k3"]
    not_three = await aclient.store.search_items([root], filter={"i": {"$ne": 3}, "kind": "note"}, limit=2, offset=1)
    assert keys(not_three) == among({"k0", "k1", "k2", "k4", "k5"})[1:3]
    assert keys(await aclient.store.search_items([root], limit=2, offset=3)) == order[3:5]


def test_list_namespaces_by_prefix_suffix_depth_and_page(client: Any) -> None:
    root = _root()
    for path in (["x", "v1"], ["y", "v1"], ["y", "v2"], ["z"]):
        client.store.put_item([root, *path], "k", {"n": 1})
    listed = client.store.list_namespaces(prefix=[root])["namespaces"]
    assert listed == [[root, "x", "v1"], [root, "y", "v1"], [root, "y", "v2"], [root, "z"]]
    assert client.store.list_namespaces(prefix=[root], suffix=["v1"])["namespaces"] == [
        [root, "x", "v1"],
        [root, "y", "v1"],
    ]
    assert client.store.list_namespaces(prefix=[root, "*", "v2"])["namespaces"] == [[root, "y", "v2"]]
    assert client.store.list_namespaces(prefix=[root], max_depth=2)["namespaces"] == [
        [root, "x"],
        [root, "y"],
        [root, "z"],
    ]
    assert client.store.list_namespaces(prefix=[root], limit=2, offset=1)["namespaces"] == listed[1:3]


@pytest.mark.parametrize(
    ("method", "path", "body", "field", "peer_status"),
    [
        ("PUT", "/store/items", {"namespace": [], "key": "k", "value": {"v": 1}}, "namespace", 400),
        ("PUT", "/store/items", {"namespace": ["a", "b.c"], "key": "k", "value": {"v": 1}}, "namespace", 422),
        ("PUT", "/store/items", {"namespace": ["a", ""], "key": "k", "value": {"v": 1}}, "namespace", 422),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": [1, 2]}, "value", None),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": "text"}, "value", None),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k"}, "value", None),
        ("DELETE", "/store/items", {"namespace": [], "key": "k"}, "namespace", 204),
        ("POST", "/store/items/search", {"namespace_prefix": ["a.b"]}, "namespace_prefix", 422),
        ("POST", "/store/items/search", {"namespace_prefix": ["a"], "filter": {"i": {"$regex": "x"}}}, "filter", 200),
        ("POST", "/store/items/search", {"namespace_prefix": ["a"], "limit": -1}, "limit", 200),
        ("POST", "/store/namespaces", {"max_depth": 0}, "max_depth", 200),
    ],
)
def test_bad_input_is_refused_with_a_422_naming_the_field(
    platform: Platform, method: str, path: str, body: dict[str, Any], field: str, peer_status: int | None
) -> None:
    """``peer_status``: what LangGraph's server answers where it does not answer as ours."""
    # Raw requests: the SDK itself refuses some of these before sending them.
    with httpx.Client(base_url=platform.url) as http:
        answer = http.request(method, path, json=body)
    if platform.is_peer and peer_status is not None:
        # A divergence: ours refuses every bad store input with a 422 whose JSON detail names
        # the field; LangGraph's server answers an empty namespace 400, a bad label 422 in
        # plain text, and takes the rest (an empty delete, an unknown filter operator, a
        # negative limit, a depth of 0).
        assert answer.status_code == peer_status, answer.text
        return
    assert answer.status_code == 422, answer.text
    assert field in str(answer.json()["detail"])


def test_a_get_with_an_empty_namespace_or_a_dotted_label_is_refused(ours: SdkServer) -> None:
    with httpx.Client(base_url=ours.url) as http:
        empty = http.get("/store/items", params={"key": "k"})
        dotted = http.get("/store/items", params=[("namespace", "a"), ("namespace", "b.c"), ("key", "k")])
    assert empty.status_code == 422 and empty.json()["detail"].startswith("namespace")
    assert dotted.status_code == 422 and "namespace[1]" in dotted.json()["detail"]


@contextmanager
def _database_for(platform: Platform, directory: Path) -> Iterator[str]:
    """A database of the case's own, of the platform's kind, that two servers in turn use."""
    if platform.kind == "sqlite":
        yield f"sqlite+aiosqlite:///{directory / 'kept.db'}"
        return
    with fresh_database() as name:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"


def test_items_survive_a_gateway_restart(ours: SdkServer, platform: Platform, tmp_path: Path) -> None:
    with _database_for(platform, tmp_path) as url:
        with sdk_server(tmp_path / "first", database_url=url, plugins=PLUGINS) as first:
            writer = get_sync_client(url=first.url, api_key=None)
            writer.store.put_item(["kept", "u1"], "prefs", {"theme": "dark", "n": [1, 2]})
            written = writer.store.get_item(["kept", "u1"], "prefs")
        with sdk_server(tmp_path / "second", database_url=url, plugins=PLUGINS) as second:
            reader = get_sync_client(url=second.url, api_key=None)
            assert reader.store.get_item(["kept", "u1"], "prefs") == written
            assert reader.store.list_namespaces(prefix=["kept"])["namespaces"] == [["kept", "u1"]]


def test_a_graph_reads_through_runtime_store_what_the_client_wrote(client: Any, ours: SdkServer) -> None:
    label, key = _root(), "fav"
    client.store.put_item(["notes", label], key, {"colour": "teal"})
    thread = client.threads.create()
    parts = list(
        client.runs.stream(
            thread["thread_id"], "lead_agent", input=human(f"what is store:{label}/{key}?"), stream_mode="custom"
        )
    )
    seen = [part.data["store"] for part in parts if part.event == "custom" and "store" in (part.data or {})]
    assert seen and seen[0] == {"label": label, "key": key, "read": {"colour": "teal"}}
    # And what the run wrote through runtime.store, the client reads.
    assert client.store.get_item(["seen", label], key)["value"] == {"read": {"colour": "teal"}}


async def test_a_graph_sees_the_latest_value_a_client_wrote(aclient: Any, ours: SdkServer) -> None:
    label, key = _root(), "fav"
    thread = await aclient.threads.create()
    await aclient.runs.wait(thread["thread_id"], "lead_agent", input=human(f"store:{label}/{key}"))
    assert (await aclient.store.get_item(["seen", label], key))["value"] == {"read": None}
    await aclient.store.put_item(["notes", label], key, {"colour": "amber"})
    await aclient.runs.wait(thread["thread_id"], "lead_agent", input=human(f"again store:{label}/{key}"))
    assert (await aclient.store.get_item(["seen", label], key))["value"] == {"read": {"colour": "amber"}}
