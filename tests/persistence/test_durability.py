"""DEERFLOW_DATABASE_DURABILITY reaches every kind of connection the Gateway opens, on both databases.

Asked of each connection itself (``PRAGMA synchronous``, ``SHOW synchronous_commit``): the
setting is per connection, so a connection opened without it would silently commit at
another durability than the operator chose.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from deerflow_ext.config.schema import AppConfig
from deerflow_ext.config.settings import Settings, SettingsError, load_settings
from deerflow_ext.gateway import create_app
from deerflow_ext.persistence import create_engine, open_checkpointer, psycopg_conninfo
from deerflow_ext.persistence.durability import Durability, durability_of
from deerflow_ext.persistence.loop_statements import LoopStatements
from deerflow_ext.persistence.transactions import transactions_for
from pg_support import PG_UNREACHABLE, fresh_database

# SQLite answers PRAGMA synchronous with a number: 1 NORMAL, 2 FULL.
SQLITE: dict[Durability | None, int] = {None: 1, "full": 2, "relaxed": 1}
POSTGRES: dict[Durability | None, str] = {None: "on", "full": "on", "relaxed": "off"}
DURABILITIES: list[Durability | None] = [None, "full", "relaxed"]


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _question(url: str) -> str:
    return "PRAGMA synchronous" if _is_sqlite(url) else "SHOW synchronous_commit"


def _expected(url: str, durability: Durability | None) -> Any:
    return SQLITE[durability] if _is_sqlite(url) else POSTGRES[durability]


async def _engine_answers(engine: Any, question: str) -> list[Any]:
    """The engine's own connection, its synchronous twin's and (PostgreSQL) its loop statements'."""
    async with engine.connect() as conn:
        answers = [(await conn.exec_driver_sql(question)).scalar()]
    tx = transactions_for(engine)
    try:
        answers.append(await tx.read(lambda conn: conn.exec_driver_sql(question).scalar()))
    finally:
        await tx.aclose()
    loop = LoopStatements.for_engine(engine)
    if loop is not None:
        try:
            row = await loop.first(text(question), {})
            answers.append(row[0] if row else None)
        finally:
            await loop.aclose()
    return answers


def _saver_answers(saver: Any, question: str) -> Callable[[], list[Any]]:
    """The checkpointer's connections: SQLite's one, PostgreSQL's pooled psycopg one."""
    if hasattr(saver, "pool"):
        return lambda: [_pooled(saver.pool, question)]
    return lambda: [saver.conn.execute(question).fetchone()[0]]


def _pooled(pool: Any, question: str) -> Any:
    with pool.connection() as conn:
        row = conn.execute(question).fetchone()
        return next(iter(row.values())) if isinstance(row, dict) else row[0]


@pytest.mark.parametrize("durability", DURABILITIES)
async def test_every_persistence_connection_commits_at_the_chosen_durability(
    database_url: str, durability: Durability | None
) -> None:
    question, expected = _question(database_url), _expected(database_url, durability)
    engine = create_engine(database_url, durability=durability)
    try:
        assert durability_of(engine) == durability
        assert await _engine_answers(engine, question) == [expected] * (2 if _is_sqlite(database_url) else 3)
    finally:
        await engine.dispose()
    async with open_checkpointer(database_url, durability) as saver:
        assert await saver.thread.run(_saver_answers(saver, question)) == [expected]


@pytest.mark.postgres
@pytest.mark.skipif(PG_UNREACHABLE is not None, reason=PG_UNREACHABLE or "")
@pytest.mark.parametrize("durability", DURABILITIES)
async def test_the_checkpointers_conninfo_asks_both_drivers_for_it(durability: Durability | None) -> None:
    """The checkpointer hands one libpq URL to psycopg (its pools) and asyncpg (its loop
    reads and writes): both must read the setting from it."""
    with fresh_database() as name:
        conninfo = psycopg_conninfo(f"postgresql://postgres@127.0.0.1:5432/{name}", durability)
        with psycopg.connect(conninfo) as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone() == (POSTGRES[durability],)
        connection = await asyncpg.connect(dsn=conninfo)
        try:
            assert await connection.fetchval("SHOW synchronous_commit") == POSTGRES[durability]
        finally:
            await connection.close()


@pytest.mark.parametrize("durability", ["full", "relaxed"])
async def test_the_gateway_opens_its_connections_at_the_variables_durability(
    database_url: str, durability: Durability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEERFLOW_DATABASE_DURABILITY", durability)
    monkeypatch.setenv("DEERFLOW_DATABASE_URL", database_url)
    monkeypatch.setenv("DEERFLOW_CONFIG", str(tmp_path / "config.yaml"))
    settings = load_settings()
    app = create_app(settings, config=AppConfig.model_validate({"memory": {"enabled": False}}))
    question, expected = _question(database_url), _expected(database_url, durability)
    async with app.router.lifespan_context(app):
        runtime = app.state.runtime
        answers = await _engine_answers(runtime.engine, question)
        answers += await runtime.checkpointer.thread.run(_saver_answers(runtime.checkpointer, question))
    assert answers == [expected] * len(answers)


def test_an_unknown_durability_is_refused_in_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEERFLOW_DATABASE_DURABILITY", "sometimes")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith("DEERFLOW_DATABASE_DURABILITY='sometimes'") and "\n" not in message
    monkeypatch.delenv("DEERFLOW_DATABASE_DURABILITY")
    assert Settings().database_durability is None  # unset: each database's own default


def test_the_libpq_options_survive_the_url_rendering() -> None:
    """A space in ``options`` would be rendered as ``+``, which libpq does not decode."""
    conninfo = psycopg_conninfo("postgresql+asyncpg://u@h:5432/db", "relaxed")
    assert make_url(conninfo).query == {"options": "-csynchronous_commit=off"}
    assert "+" not in conninfo.partition("?")[2]
