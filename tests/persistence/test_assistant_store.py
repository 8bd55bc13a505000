"""The assistant store on SQLite and PostgreSQL: metadata matched by JSON type and value in
SQL, versions numbered one after another under concurrent updates, the built-in assistant
left alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from deerflow_ext.persistence import create_engine, upgrade_head
from deerflow_ext.persistence.assistants import (
    AssistantChange,
    AssistantDraft,
    AssistantNotFoundError,
    AssistantQuery,
    AssistantStore,
    BuiltInAssistantError,
)

META = {"team": "x", "n": 1, "r": 1.5, "yes": True, "none": None, "tags": [1, "a"], "nested": {"k": "v", "d": 2}}


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[AssistantStore]:
    engine = create_engine(database_url)
    await upgrade_head(engine)
    try:
        yield AssistantStore(engine)
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("wanted", "matches"),
    [
        ({}, True),
        ({"team": "x"}, True),
        ({"team": "y"}, False),
        ({"n": 1}, True),
        ({"n": 1.0}, True),  # one JSON number, as PostgreSQL's jsonb compares it
        ({"n": "1"}, False),
        ({"n": True}, False),
        ({"yes": True}, True),
        ({"yes": 1}, False),
        ({"r": 1.5}, True),
        ({"none": None}, True),
        ({"absent": None}, False),
        ({"tags": [1, "a"]}, True),
        ({"tags": [1, "b"]}, False),
        ({"nested": {"k": "v"}}, True),
        ({"nested": {"k": "v", "d": 2}}, True),
        ({"nested": {"k": "w"}}, False),
        ({"nested": {}}, True),
        ({"team": {}}, False),
        ({"team": "x", "n": 2}, False),
    ],
)
async def test_metadata_filters_match_by_json_type_and_value(
    store: AssistantStore, wanted: dict[str, Any], matches: bool
) -> None:
    made = await store.create(AssistantDraft(graph_id="lead_agent", name="Metadata", metadata=META), if_exists="raise")
    rows, _ = await store.search(AssistantQuery(metadata=wanted, limit=100, select=("assistant_id",)))
    assert (made.assistant_id in {r["assistant_id"] for r in rows}) is matches
    assert await store.count(AssistantQuery(metadata=wanted, name="metadata")) == (1 if matches else 0)


async def test_concurrent_updates_number_their_versions_one_after_another(store: AssistantStore) -> None:
    made = await store.create(AssistantDraft(graph_id="lead_agent", name="v"), if_exists="raise")
    updated = await asyncio.gather(
        *(store.update(made.assistant_id, AssistantChange(metadata={f"k{i}": i})) for i in range(6))
    )
    assert sorted(u.version for u in updated) == [2, 3, 4, 5, 6, 7]
    versions = await store.versions(made.assistant_id, limit=100)
    assert [v.version for v in versions] == [7, 6, 5, 4, 3, 2, 1]
    final = await store.get(made.assistant_id)
    assert final is not None and final.version == 7
    assert final.metadata == {f"k{i}": i for i in range(6)}  # each merged into the one before


async def test_the_built_in_assistant_is_a_row_that_stays_as_it_is(store: AssistantStore) -> None:
    lead = await store.get("lead_agent")
    assert lead is not None and (lead.version, lead.config, lead.context) == (1, {}, {})
    for attempt in (
        store.update("lead_agent", AssistantChange(name="mine")),
        store.set_latest("lead_agent", 1),
        store.delete("lead_agent"),
    ):
        with pytest.raises(BuiltInAssistantError, match="lead_agent is built in"):
            await attempt
    assert await store.count(AssistantQuery()) == 1
    with pytest.raises(AssistantNotFoundError):
        await store.update("nobody", AssistantChange(name="x"))
