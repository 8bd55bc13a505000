"""``ItemStore`` with ``store.index``: semantic search on a real database, SQLite through
``sqlite-vec`` and PostgreSQL (pgvector when the database has it, else the exact scan in
SQL; this machine's has not: ``test_pgvector_ranks_alike`` says so and skips)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from langgraph.store.base import PutOp

import semantic_vocab
from deerflow_ext.config.schema import StoreIndexConfig
from deerflow_ext.persistence.item_store import ItemStore
from deerflow_ext.persistence.store_table import STORE_VECTORS
from deerflow_ext.semantic import StoreIndex, load_store_index


def _index(embed: str = "semantic_vocab:embed", fields: list[str] | None = None) -> StoreIndex:
    config = StoreIndexConfig(embed=embed, dims=semantic_vocab.DIMS, fields=fields or ["$"])
    index = load_store_index(config, base=Path("."))
    assert index is not None
    return index


@pytest.fixture
async def store(engine: sa.ext.asyncio.AsyncEngine) -> AsyncIterator[ItemStore]:
    items = ItemStore(engine, index=_index(fields=["text"]))
    try:
        yield items
    finally:
        await items.aclose()


async def _vector_count(engine: sa.ext.asyncio.AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(STORE_VECTORS))).scalar_one())


async def test_nearest_first_with_scores_filters_prefix_and_pages(store: ItemStore) -> None:
    notes = {
        "c": ("a", {"text": "my cat and another cat", "kind": "pet"}),
        "d": ("a", {"text": "the dog barks", "kind": "pet"}),
        "t": ("b", {"text": "a train and a plane", "kind": "travel"}),
        "p": ("b", {"text": "pizza or pasta", "kind": "food"}),
    }
    for key, (sub, value) in notes.items():
        await store.aput(("notes", sub), key, value)

    found = await store.asearch(("notes",), query="cat", limit=10)
    assert found[0].key == "c"
    assert all(item.score is not None for item in found)
    scores = [item.score for item in found]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert found[0].score is not None and found[0].score > 0.9

    travel = await store.asearch(("notes",), query="plane trip", limit=1)
    assert [item.key for item in travel] == ["t"]
    pets = await store.asearch(("notes",), query="train", filter={"kind": "pet"}, limit=10)
    assert {item.key for item in pets} == {"c", "d"}  # the filter holds whatever the similarity
    under_a = await store.asearch(("notes", "a"), query="pizza", limit=10)
    assert {item.key for item in under_a} == {"c", "d"}
    whole = [item.key for item in await store.asearch(("notes",), query="dog", limit=10)]
    paged = [item.key for item in await store.asearch(("notes",), query="dog", limit=2, offset=1)]
    assert paged == whole[1:3] and whole[0] == "d"
    filtered_page = await store.asearch(("notes",), query="dog", filter={"kind": "pet"}, limit=1, offset=1)
    assert [item.key for item in filtered_page] == ["c"]
    plain = await store.asearch(("notes",), limit=10)  # no query: newest first, no score
    assert [item.key for item in plain] == ["p", "t", "d", "c"] and {item.score for item in plain} == {None}


async def test_index_override_false_and_replacements_keep_vectors_right(
    store: ItemStore, engine: sa.ext.asyncio.AsyncEngine
) -> None:
    await store.aput(("n",), "by-title", {"title": "fish", "text": "car"}, index=["title"])
    await store.aput(("n",), "unindexed", {"text": "fish fish fish"}, index=False)
    await store.aput(("n",), "car", {"text": "a car"})
    found = await store.asearch(("n",), query="fish", limit=10)
    assert [item.key for item in found] == ["by-title", "car", "unindexed"]
    assert found[-1].score is None  # not embedded: after every scored item, as LangGraph's stores
    assert await _vector_count(engine) == 2

    await store.aput(("n",), "car", {"text": "fish"})  # a replacement re-embeds
    assert (await store.asearch(("n",), query="fish", limit=1))[0].key in {"by-title", "car"}
    await store.aput(("n",), "car", {"text": "pizza"}, index=False)  # and index=False drops the old vectors
    await store.adelete(("n",), "by-title")  # a delete takes its vectors along (the cascade)
    assert await _vector_count(engine) == 0
    await store.abatch([PutOp(("n",), "x", {"text": "dog"}), PutOp(("n",), "y", {"text": "cat"})])
    assert [item.key for item in await store.asearch(("n",), query="cat", limit=1)] == ["y"]


async def test_embeddings_run_off_the_event_loop(store: ItemStore) -> None:
    semantic_vocab.CALLS.clear()
    await store.aput(("loop",), "k", {"text": "dog"})
    await store.asearch(("loop",), query="dog")
    loop_thread = threading.current_thread().name
    assert len(semantic_vocab.CALLS) == 2
    assert all(name != loop_thread for _, name in semantic_vocab.CALLS)


async def test_an_embeddings_object_and_a_wrong_dimension(engine: sa.ext.asyncio.AsyncEngine) -> None:
    store = ItemStore(engine, index=_index("semantic_vocab:VocabEmbeddings", ["text"]))
    try:
        await store.aput(("o",), "k", {"text": "plane"})
        assert (await store.asearch(("o",), query="plane"))[0].score == pytest.approx(1.0, abs=1e-4)
    finally:
        await store.aclose()
    config = StoreIndexConfig(embed="semantic_vocab:embed", dims=3)
    wrong = ItemStore(engine, index=load_store_index(config, base=Path(".")))
    try:
        with pytest.raises(
            ValueError, match=r"store\.index\.dims is 3, but semantic_vocab:embed returned a vector of 8"
        ):
            await wrong.aput(("o",), "k2", {"text": "plane"})
        assert await wrong.aget(("o",), "k2") is None  # nothing written
    finally:
        await wrong.aclose()


async def test_pgvector_ranks_alike(database_url: str, engine: sa.ext.asyncio.AsyncEngine) -> None:
    """pgvector's ``<=>`` path, when the PostgreSQL server offers the extension."""
    if not database_url.startswith("postgresql"):
        pytest.skip("pgvector is PostgreSQL's (SQLite ranks through sqlite-vec, tested above)")
    async with engine.connect() as conn:
        offered = (await conn.execute(sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"))).first()
    if offered is None:
        pytest.skip("this PostgreSQL server has no pgvector (pg_available_extensions lists no 'vector')")
    async with engine.begin() as conn:
        await conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
    store = ItemStore(engine, index=_index(fields=["text"]))
    try:
        await store.aput(("v",), "cat", {"text": "cat"})
        await store.aput(("v",), "dog", {"text": "dog"})
        found = await store.asearch(("v",), query="dog")
        assert [item.key for item in found] == ["dog", "cat"] and found[0].score == pytest.approx(1.0, abs=1e-4)
        assert store._pgvector is True
    finally:
        await store.aclose()
