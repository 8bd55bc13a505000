"""One statement for a batch's upserts (``persistence/joined_upserts.py``).

The checks: which statements are of the joinable form; that a joined batch leaves exactly
what its statements sent one after another leave (hypothesis draws batches whose rows
share keys with each other and with rows already there, on real PostgreSQL); and that what
cannot be joined is refused, for the caller to send as before.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.postgres import base as langgraph_sql

from deerflow_ext.persistence.asyncpg_form import numbered, parameter_types
from deerflow_ext.persistence.joined_upserts import joined, upsert
from pg_support import PG_UNREACHABLE, fresh_database

KEPT = "INSERT INTO kept (k1, k2, v) VALUES ($1, $2, $3) ON CONFLICT (k1, k2) DO NOTHING"
LATEST = (
    "INSERT INTO latest (k, a, b, c)\n    VALUES ($1, $2, $3, $4)\n    ON CONFLICT (k) DO UPDATE SET\n"
    "        b = EXCLUDED.b,\n        c = EXCLUDED.c;\n"
)
TABLES = (
    "CREATE TABLE kept (k1 int, k2 text, v text, PRIMARY KEY (k1, k2));"
    "CREATE TABLE latest (k int PRIMARY KEY, a text, b text, c jsonb);"
    "CREATE TABLE listed (k int PRIMARY KEY, tags text[]);"
)


@pytest.mark.parametrize(
    "query",
    [
        langgraph_sql.UPSERT_CHECKPOINT_BLOBS_SQL,
        langgraph_sql.UPSERT_CHECKPOINTS_SQL,
        langgraph_sql.UPSERT_CHECKPOINT_WRITES_SQL,
        langgraph_sql.INSERT_CHECKPOINT_WRITES_SQL,
    ],
)
def test_langgraphs_write_statements_are_of_the_joinable_form(query: str) -> None:
    form = upsert(numbered(query))
    assert form is not None, query
    assert form.table.startswith("checkpoint") and form.key and len(form.columns) == query.count("%s")


def test_the_forms_key_and_updated_columns_are_read_by_position() -> None:
    form = upsert(LATEST)
    assert form is not None
    assert (form.table, form.columns, form.key, form.updated) == ("latest", ("k", "a", "b", "c"), (0,), (2, 3))
    kept = upsert(KEPT)
    assert kept is not None and kept.key == (0, 1) and kept.updated is None


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("INSERT INTO t (a, b) VALUES ($1, $2)", id="no-on-conflict"),
        pytest.param("INSERT INTO t (a, b) VALUES ($2, $1) ON CONFLICT (a) DO NOTHING", id="placeholders-reordered"),
        pytest.param("INSERT INTO t (a, b) VALUES ($1, now()) ON CONFLICT (a) DO NOTHING", id="an-expression"),
        pytest.param("INSERT INTO s.t (a, b) VALUES ($1, $2) ON CONFLICT (a) DO NOTHING", id="schema-qualified"),
        pytest.param("INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT (a) DO NOTHING RETURNING a", id="returning"),
        pytest.param("INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT (a) DO UPDATE SET b = t.b + 1", id="computed"),
        pytest.param("INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.a", id="crossed"),
        pytest.param(
            "INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b WHERE t.b IS NULL",
            id="conditional",
        ),
        pytest.param("INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT (c) DO NOTHING", id="key-not-inserted"),
        pytest.param("INSERT INTO t (a, a) VALUES ($1, $2) ON CONFLICT (a) DO NOTHING", id="column-twice"),
        pytest.param("UPDATE t SET b = $2 WHERE a = $1", id="an-update"),
    ],
)
def test_statements_of_any_other_form_are_not_joinable(sql: str) -> None:
    assert upsert(sql) is None


class _Database:
    """Two schemas with the same tables, a connection on each: batches sent one statement
    after another on ``apart``, joined on ``joined``. One event loop for every example."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.apart, self.together = (self.run(self._connect(dsn, schema)) for schema in ("apart", "together"))

    async def _connect(self, dsn: str, schema: str) -> asyncpg.Connection:
        admin = await asyncpg.connect(dsn)
        await admin.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}; SET search_path TO {schema}; {TABLES}")
        await admin.close()
        connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
        await connection.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        return connection

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def close(self) -> None:
        for connection in (self.apart, self.together):
            self.run(connection.close())
        self.loop.close()


@pytest.fixture(scope="module")
def database() -> Iterator[_Database]:
    if PG_UNREACHABLE is not None:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database() as name:
        opened = _Database(f"postgresql://postgres@127.0.0.1:5432/{name}")
        try:
            yield opened
        finally:
            opened.close()


async def _contents(connection: asyncpg.Connection) -> list[list[tuple[Any, ...]]]:
    return [
        [tuple(row) for row in await connection.fetch(f"SELECT * FROM {table} ORDER BY 1, 2")]
        for table in ("kept", "latest")
    ]


async def _apart(connection: asyncpg.Connection, batch: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
    for sql, rows in batch:
        await connection.executemany(sql, rows)


async def _together(connection: asyncpg.Connection, batch: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
    one = joined([(sql, await parameter_types(connection, sql), rows) for sql, rows in batch])
    assert one is not None
    await connection.execute(one.sql, *one.arrays)


_small_text = st.sampled_from(["x", "y", "z"]) | st.none()
_kept_rows = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["a", "b"]), _small_text), max_size=6)
_small_json = st.none() | st.dictionaries(st.sampled_from("pq"), st.integers(0, 3))
_latest_rows = st.lists(st.tuples(st.integers(0, 2), _small_text, _small_text, _small_json), max_size=6)


@pytest.mark.postgres
@pytest.mark.skipif(PG_UNREACHABLE is not None, reason=PG_UNREACHABLE or "")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=st.tuples(_kept_rows, _latest_rows),
    kept=_kept_rows.filter(bool),
    latest=_latest_rows.filter(bool),
    latest_first=st.booleans(),
)
def test_a_joined_batch_leaves_what_its_statements_sent_one_after_another_leave(
    database: _Database,
    before: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]],
    kept: list[tuple[Any, ...]],
    latest: list[tuple[Any, ...]],
    latest_first: bool,
) -> None:
    batch = [(KEPT, kept), (LATEST, latest)]
    if latest_first:
        batch.reverse()
    for connection, send in ((database.apart, _apart), (database.together, _together)):
        database.run(connection.execute("TRUNCATE kept, latest"))
        seeded = [(sql, rows) for sql, rows in zip((KEPT, LATEST), before, strict=True) if rows]
        database.run(_apart(connection, seeded))
        database.run(send(connection, batch))
    assert database.run(_contents(database.together)) == database.run(_contents(database.apart))


@pytest.mark.postgres
@pytest.mark.skipif(PG_UNREACHABLE is not None, reason=PG_UNREACHABLE or "")
def test_what_cannot_be_joined_is_refused_for_the_caller_to_send_as_it_is(database: _Database) -> None:
    connection = database.together
    types = {sql: database.run(parameter_types(connection, sql)) for sql in (KEPT, LATEST)}
    rows = [(1, "a", "x")]
    again = KEPT.replace("DO NOTHING", "DO UPDATE SET v = EXCLUDED.v")
    # Two kinds into one table: their rows could meet in one statement.
    assert joined([(KEPT, types[KEPT], rows), (again, types[KEPT], rows)]) is None
    # A key that cannot be compared in Python.
    assert joined([(LATEST, types[LATEST], [({"no": "hash"}, None, None, None)])]) is None
    # A parameter of an array type: unnest would flatten it.
    listed = "INSERT INTO listed (k, tags) VALUES ($1, $2) ON CONFLICT (k) DO NOTHING"
    assert joined([(listed, database.run(parameter_types(connection, listed)), [(1, ["a", "b"])])]) is None
    # A kind with no rows (an executemany of none) is left out; with nothing left, nothing is joined.
    with_none = joined([(KEPT, types[KEPT], []), (LATEST, types[LATEST], [(1, "a", "b", None)])])
    assert with_none is not None and "kept" not in with_none.sql and len(with_none.arrays) == 4
    assert joined([(KEPT, types[KEPT], [])]) is None
    # And one kind alone is joined: one statement, no WITH.
    one = joined([(KEPT, types[KEPT], rows + rows)])
    assert one is not None and not one.sql.startswith("WITH") and one.arrays == ([1], ["a"], ["x"])
