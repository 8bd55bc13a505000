"""``ItemStore`` (LangGraph's ``BaseStore`` over ``store_items``) on a real database: SQLite,
and PostgreSQL when reachable. Every case goes through the public ``BaseStore`` methods or
``abatch``, as a graph's ``runtime.store`` and the Gateway's routes do."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from deerflow_ext.persistence import STORE_ITEMS
from deerflow_ext.persistence.item_matching import InvalidFilterError
from deerflow_ext.persistence.item_store import ItemStore


@pytest.fixture
async def store(engine: sa.ext.asyncio.AsyncEngine) -> AsyncIterator[ItemStore]:
    items = ItemStore(engine)
    try:
        yield items
    finally:
        await items.aclose()


async def test_put_get_replace_and_delete_one_item(store: ItemStore) -> None:
    assert await store.aget(("users", "u1"), "prefs") is None
    await store.aput(("users", "u1"), "prefs", {"theme": "dark"})
    first = await store.aget(("users", "u1"), "prefs")
    assert first is not None
    assert (first.namespace, first.key, first.value) == (("users", "u1"), "prefs", {"theme": "dark"})
    assert first.created_at.tzinfo is not None and first.created_at == first.updated_at

    await store.aput(("users", "u1"), "prefs", {"theme": "light", "size": 3})
    second = await store.aget(("users", "u1"), "prefs")
    assert second is not None and second.value == {"theme": "light", "size": 3}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at

    # The same key under another namespace (or a namespace that merely shares a prefix) is
    # another item.
    assert await store.aget(("users",), "prefs") is None
    assert await store.aget(("users", "u1", "x"), "prefs") is None

    await store.adelete(("users", "u1"), "prefs")
    assert await store.aget(("users", "u1"), "prefs") is None
    await store.adelete(("users", "u1"), "prefs")  # deleting what is not there is no error


async def test_search_by_prefix_filter_and_pages(store: ItemStore) -> None:
    for i in range(6):
        await store.aput(("docs", "team-a" if i % 2 == 0 else "team-b"), f"d{i}", {"i": i, "kind": "note"})
    await store.aput(("docs-archive",), "old", {"i": 99, "kind": "note"})  # shares "docs" as text only
    await store.aput(("Docs",), "upper", {"i": 98, "kind": "note"})  # another case is another label
    await store.aput(("docs", "team-a", "deep"), "nested", {"i": 7, "kind": {"sub": 1}, "tags": ["x", "y"]})

    under_docs = await store.asearch(("docs",), limit=100)
    assert sorted(item.key for item in under_docs) == ["d0", "d1", "d2", "d3", "d4", "d5", "nested"]
    # Newest first, and the search's own items carry no score (no vector query).
    assert [item.key for item in under_docs][:2] == ["nested", "d5"]
    assert all(item.score is None for item in under_docs)

    team_a = await store.asearch(("docs", "team-a"), limit=100)
    assert sorted(item.key for item in team_a) == ["d0", "d2", "d4", "nested"]
    assert len(await store.asearch((), limit=100)) == 9

    assert [i.key for i in await store.asearch(("docs",), filter={"i": {"$gte": 2, "$lt": 5}})] == ["d4", "d3", "d2"]
    assert [i.key for i in await store.asearch(("docs",), filter={"i": {"$gt": 4}})] == ["nested", "d5"]
    assert [i.key for i in await store.asearch(("docs",), filter={"i": {"$lte": 0}})] == ["d0"]
    assert [i.key for i in await store.asearch(("docs",), filter={"i": {"$ne": 7}}, limit=2)] == ["d5", "d4"]
    assert [i.key for i in await store.asearch(("docs",), filter={"i": {"$eq": 3}})] == ["d3"]
    assert [i.key for i in await store.asearch(("docs",), filter={"i": 1})] == ["d1"]
    assert [i.key for i in await store.asearch(("docs",), filter={"kind": {"sub": 1}})] == ["nested"]
    assert [i.key for i in await store.asearch(("docs",), filter={"tags": ["x", "y"]})] == ["nested"]
    assert await store.asearch(("docs",), filter={"missing": {"$gt": 0}}) == []
    assert await store.asearch(("docs",), filter={"kind": {"$gt": 1}}) == []  # text against a number

    everything = [i.key for i in await store.asearch(("docs",), limit=100)]
    assert [i.key for i in await store.asearch(("docs",), limit=3, offset=2)] == everything[2:5]
    notes = [i.key for i in await store.asearch(("docs",), filter={"kind": "note"}, limit=100)]
    paged = [i.key for i in await store.asearch(("docs",), filter={"kind": "note"}, limit=2, offset=3)]
    assert paged == notes[3:5]

    # A query string asks for vector search, which the store does not do: it is ignored.
    assert [i.key for i in await store.asearch(("docs", "team-b"), query="anything")] == ["d5", "d3", "d1"]


async def test_a_filtered_search_scans_past_one_batch(store: ItemStore) -> None:
    await store.abatch([PutOp(("many",), f"k{i:03}", {"even": i % 2 == 0, "i": i}) for i in range(450)])
    found = await store.asearch(("many",), filter={"even": False, "i": {"$gte": 3}}, limit=500)
    assert len(found) == 224 and all(item.value["i"] % 2 == 1 for item in found)
    assert len(await store.asearch(("many",), filter={"i": {"$gte": 440}}, offset=5)) == 5


async def test_list_namespaces_with_conditions_depth_and_pages(store: ItemStore) -> None:
    for namespace in [("a", "x", "v1"), ("a", "y", "v1"), ("a", "y", "v2"), ("b", "x", "v1"), ("a",), ("ab", "z")]:
        await store.aput(namespace, "k", {"n": 1})
    everything = await store.alist_namespaces()
    assert everything == [("a",), ("a", "x", "v1"), ("a", "y", "v1"), ("a", "y", "v2"), ("ab", "z"), ("b", "x", "v1")]
    assert await store.alist_namespaces(prefix=("a",)) == [("a",), ("a", "x", "v1"), ("a", "y", "v1"), ("a", "y", "v2")]
    assert await store.alist_namespaces(suffix=("v1",)) == [("a", "x", "v1"), ("a", "y", "v1"), ("b", "x", "v1")]
    assert await store.alist_namespaces(prefix=("*", "x")) == [("a", "x", "v1"), ("b", "x", "v1")]
    assert await store.alist_namespaces(prefix=("a",), suffix=("*", "v2")) == [("a", "y", "v2")]
    assert await store.alist_namespaces(prefix=("a",), max_depth=2) == [("a",), ("a", "x"), ("a", "y")]
    assert await store.alist_namespaces(max_depth=1) == [("a",), ("ab",), ("b",)]
    assert await store.alist_namespaces(limit=2, offset=1) == everything[1:3]
    op = ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("x", "*")),))
    assert await store.abatch([op]) == [[("a", "x", "v1"), ("b", "x", "v1")]]


async def test_a_batch_runs_its_ops_in_order_and_keeps_the_last_put(store: ItemStore) -> None:
    results = await store.abatch(
        [
            PutOp(("ns",), "k", {"v": 1}),
            PutOp(("ns",), "k", {"v": 2}),
            PutOp(("ns",), "gone", {"v": 0}),
            PutOp(("ns",), "gone", None),
            GetOp(("ns",), "k"),
            SearchOp(("ns",)),
            ListNamespacesOp(),
        ]
    )
    assert results[:4] == [None, None, None, None]
    assert results[4] is not None and results[4].value == {"v": 2}
    assert [item.key for item in results[5]] == ["k"]
    assert results[6] == [("ns",)]
    # Reads alone take no write transaction; the results come back in the ops' order.
    read = await store.abatch([GetOp(("ns",), "missing"), GetOp(("ns",), "k")])
    assert read[0] is None and read[1] is not None and read[1].key == "k"


async def test_ttl_expires_items_and_a_read_refreshes_it(store: ItemStore, engine: sa.ext.asyncio.AsyncEngine) -> None:
    await store.aput(("t",), "short", {"v": 1}, ttl=1.0)
    await store.aput(("t",), "forever", {"v": 2})

    async def expires_at(key: str) -> datetime | None:
        async with engine.connect() as conn:
            found = (
                await conn.execute(sa.select(STORE_ITEMS.c.expires_at).where(STORE_ITEMS.c.key == key))
            ).scalar_one()
        return None if found is None else (found if found.tzinfo else found.replace(tzinfo=UTC))

    first = await expires_at("short")
    assert first is not None and await expires_at("forever") is None
    await asyncio.sleep(0.01)
    assert await store.aget(("t",), "short", refresh_ttl=False) is not None
    assert await expires_at("short") == first
    assert await store.aget(("t",), "short") is not None  # refresh_ttl defaults to True
    refreshed = await expires_at("short")
    assert refreshed is not None and refreshed > first
    await store.asearch(("t",))
    searched = await expires_at("short")
    assert searched is not None and searched > refreshed

    # Past its deadline an item is gone from every read, and the sweep deletes it.
    async with engine.begin() as conn:
        past = datetime.now(UTC) - timedelta(minutes=1)
        await conn.execute(sa.update(STORE_ITEMS).where(STORE_ITEMS.c.key == "short").values(expires_at=past))
    assert await store.aget(("t",), "short") is None
    assert [item.key for item in await store.asearch(("t",))] == ["forever"]
    await store.aput(("gone",), "k", {"v": 0}, ttl=1.0)
    async with engine.begin() as conn:
        await conn.execute(sa.update(STORE_ITEMS).where(STORE_ITEMS.c.prefix == "gone").values(expires_at=past))
    assert ("gone",) not in await store.alist_namespaces()
    assert await store.sweep_expired() == 2
    assert await store.sweep_expired() == 0


async def test_bad_namespaces_and_filters_are_refused_before_anything_is_sent(store: ItemStore) -> None:
    with pytest.raises(InvalidNamespaceError, match=r"namespace\[1\].*dot"):
        await store.abatch([PutOp(("a", "b.c"), "k", {"v": 1})])
    with pytest.raises(InvalidNamespaceError, match=r"namespace\[0\].*empty"):
        await store.abatch([GetOp(("",), "k")])
    with pytest.raises(InvalidNamespaceError, match=r"namespace_prefix\[0\]"):
        await store.abatch([SearchOp(("x.y",))])
    with pytest.raises(InvalidNamespaceError, match=r"match_conditions\[0\]\.path\[0\]"):
        await store.abatch([ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a.b",)),))])
    with pytest.raises(InvalidFilterError, match=r"filter\.score: unknown operator \$regex"):
        await store.asearch(("a",), filter={"score": {"$regex": "x"}})
    # Nothing of a refused batch was written.
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([PutOp(("ok",), "k", {"v": 1}), PutOp(("not.ok",), "k", {"v": 1})])
    assert await store.aget(("ok",), "k") is None


async def test_the_synchronous_methods_work_from_another_thread(store: ItemStore) -> None:
    # A sync tool runs in an executor thread while the loop serves the store.
    def in_a_thread() -> object:
        store.put(("sync",), "k", {"v": 1})
        item = store.get(("sync",), "k")
        return None if item is None else item.value

    assert await asyncio.to_thread(in_a_thread) == {"v": 1}
    with pytest.raises(RuntimeError, match="aget"):
        store.get(("sync",), "k")  # on the loop itself it would wait for itself


async def test_items_outlive_the_store_that_wrote_them(engine: sa.ext.asyncio.AsyncEngine) -> None:
    writer = ItemStore(engine)
    await writer.aput(("kept",), "k", {"v": [1, 2, {"x": None}]})
    await writer.aclose()
    reader = ItemStore(engine)
    try:
        item = await reader.aget(("kept",), "k")
        assert item is not None and item.value == {"v": [1, 2, {"x": None}]}
    finally:
        await reader.aclose()


async def test_an_object_mixing_operators_and_fields_is_refused_and_eq_compares_literally(store: ItemStore) -> None:
    # issue 54 row 13: "zzz" read as $lte, and an operator inside $eq's operand was applied.
    await store.aput(("f",), "low", {"v": 5})
    await store.aput(("f",), "high", {"v": 500})
    with pytest.raises(
        InvalidFilterError, match=r"filter\.v: an object holding operators \(\$gte\) cannot also hold fields \(zzz\)"
    ):
        await store.asearch(("f",), filter={"v": {"$gte": 4, "zzz": 100}})
    await store.aput(("f",), "literal", {"v": {"$eq": 1}})
    await store.aput(("f",), "one", {"v": 1})
    found = await store.asearch(("f",), filter={"v": {"$eq": {"$eq": 1}}})
    assert [item.key for item in found] == ["literal"]
    assert sorted(item.key for item in await store.asearch(("f",), filter={"v": {"$ne": {"$eq": 1}}})) == [
        "high",
        "low",
        "one",
    ]
    assert [item.key for item in await store.asearch(("f",), filter={"v": {"$eq": 1}})] == ["one"]


@pytest.mark.parametrize("ttl", [1e12, 1e308, float("inf")])
async def test_a_ttl_past_what_a_timestamp_holds_is_refused_naming_ttl(store: ItemStore, ttl: float) -> None:
    # issue 54 row 7: OverflowError (a 500) on both databases.
    with pytest.raises(ValueError, match=r"^ttl: a time to live is at most 52704000 minutes"):
        await store.aput(("t",), "k", {"v": 1}, ttl=ttl)
    assert await store.aget(("t",), "k") is None


async def test_a_search_answers_at_most_its_byte_cap_and_pages_on(
    store: ItemStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 54 row 2: limit 1000 over big items answered them all, built whole in memory.
    from deerflow_ext.persistence import item_store

    monkeypatch.setattr(item_store, "SEARCH_ANSWER_BYTES", 10_000)
    for index in range(12):
        await store.aput(("big",), f"k{index:02}", {"pad": "x" * 3000, "even": index % 2 == 0})
    first = await store.asearch(("big",), limit=1000)
    assert len(first) == 3  # three values of ~3,020 bytes fit in 10,000; a fourth would not
    rest = await store.asearch(("big",), limit=1000, offset=len(first))
    assert len(rest) == 3 and not {i.key for i in rest} & {i.key for i in first}
    evens = await store.asearch(("big",), filter={"even": True}, limit=1000)
    assert len(evens) == 3 and all(item.value["even"] for item in evens)
    monkeypatch.setattr(item_store, "SEARCH_ANSWER_BYTES", 10)
    assert len(await store.asearch(("big",), limit=5)) == 1  # always one item, however big
