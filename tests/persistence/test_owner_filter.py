"""Authorization handlers' filters (``owner_filter``) as SQL on SQLite and PostgreSQL:
equality, ``$eq`` and ``$contains``, through the assistant store's search, count, get,
update and delete, so the filter is known to sit in each statement."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.persistence.assistants import (
    AssistantChange,
    AssistantDraft,
    AssistantNotFoundError,
    AssistantQuery,
    AssistantStore,
)
from deerflow_ext.persistence.owner_filter import check_owner_filter
from deerflow_ext.persistence.thread_search import ThreadQuery

META = {"owner": "alice", "n": 1, "tags": ["red", "blue", 3], "team": {"id": "t1", "x": True}}

CASES: list[tuple[dict[str, Any], bool]] = [
    ({"owner": "alice"}, True),
    ({"owner": "bob"}, False),
    ({"owner": {"$eq": "alice"}}, True),
    ({"owner": {"$eq": "bob"}}, False),
    ({"n": 1}, True),
    ({"n": "1"}, False),
    ({"tags": {"$contains": "red"}}, True),
    ({"tags": {"$contains": 3}}, True),
    ({"tags": {"$contains": "3"}}, False),
    ({"tags": {"$contains": ["red", "blue"]}}, True),
    ({"tags": {"$contains": ["red", "green"]}}, False),
    ({"owner": {"$contains": "alice"}}, False),  # not a list
    ({"absent": {"$contains": "x"}}, False),
    ({"team": {"id": "t1"}}, True),
    ({"owner": "alice", "tags": {"$contains": "blue"}}, True),
    ({"owner": "alice", "tags": {"$contains": "green"}}, False),
]


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[AssistantStore]:
    engine = create_engine(database_url)
    await upgrade_head(engine)
    try:
        yield AssistantStore(engine)
    finally:
        await engine.dispose()


async def test_filters_select_in_every_statement(store: AssistantStore) -> None:
    made = await store.create(AssistantDraft(graph_id="lead_agent", name="owned", metadata=META), if_exists="raise")
    other = await store.create(
        AssistantDraft(graph_id="lead_agent", name="owned", metadata={"owner": "bob"}), if_exists="raise"
    )
    for filters, matches in CASES:
        check_owner_filter(filters)
        rows, _ = await store.search(AssistantQuery(name="owned", limit=100, filters=filters))
        found = {r["assistant_id"] for r in rows} - {other.assistant_id}
        assert found == ({made.assistant_id} if matches else set()), filters
        assert await store.count(AssistantQuery(name="owned", filters=filters)) == len(rows), filters
        assert (await store.get(made.assistant_id, filters) is not None) is matches, filters

    bob = {"owner": "bob"}
    with pytest.raises(AssistantNotFoundError):
        await store.update(made.assistant_id, AssistantChange(name="taken"), bob)
    with pytest.raises(AssistantNotFoundError):
        await store.delete(made.assistant_id, bob)
    with pytest.raises(AssistantNotFoundError):
        await store.versions(made.assistant_id, filters=bob)
    assert (await store.update(made.assistant_id, AssistantChange(name="kept"), {"owner": "alice"})).name == "kept"


async def test_one_thread_by_filter_agrees_with_the_search(database_url: str) -> None:
    """``get_thread(id, filters)`` sends a statement built once per filter shape, values bound;
    it must find exactly what the search (built afresh, values inline) finds."""
    engine = create_engine(database_url)
    await upgrade_head(engine)
    store = HostStore(make_session_factory(engine))
    try:
        made = await store.create_thread(META)
        other = await store.create_thread({"owner": "bob", "tags": ["red"], "n": 1})
        for filters, matches in [*CASES, ({"owner": None}, False), ({"team": {"x": True, "id": "t1"}}, True)]:
            found = await store.get_thread(made.id, filters)
            assert (found is not None and found.metadata == META) is matches, filters
            searched = {t.id for t in await store.search_threads(ThreadQuery(filters=filters))} - {other.id}
            assert searched == ({made.id} if matches else set()), filters
        assert await store.get_thread(other.id, {"owner": "alice"}) is None
        assert (await store.get_thread(other.id, {"owner": "bob"})) is not None  # the same shape, other values
    finally:
        await store.aclose()
        await engine.dispose()


@pytest.mark.parametrize(
    ("filters", "problem"),
    [
        ({"owner": {"$ne": "x"}}, "one operator of"),
        ({"owner": {"$eq": 1, "$contains": 2}}, "one operator"),
        ({'we"ird': 1}, "without"),
        ({"": 1}, "non-empty"),
    ],
)
def test_a_filter_sql_cannot_say_is_refused_naming_it(filters: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_owner_filter(filters)
