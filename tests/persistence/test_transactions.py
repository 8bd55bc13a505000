"""Transaction functions run whole: on their own thread for SQLite, on the loop otherwise."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import Connection, text

from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.persistence.transactions import LoopTransactions, ThreadTransactions, transactions_for


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[Any]:
    engine = create_engine(database_url)
    try:
        await upgrade_head(engine)
        yield engine
    finally:
        await engine.dispose()


async def test_sqlite_runs_each_transaction_whole_on_one_thread_and_postgres_on_the_loop(engine: Any) -> None:
    tx = transactions_for(engine)
    try:
        where = await tx.read(lambda conn: threading.get_ident())
        if engine.url.get_backend_name() == "sqlite":
            assert isinstance(tx, ThreadTransactions) and where != threading.get_ident()
            assert where == await tx.write(lambda conn: threading.get_ident())  # the same thread
        else:
            assert isinstance(tx, LoopTransactions) and where == threading.get_ident()
    finally:
        await tx.aclose()


def _insert_then(conn: Connection, thread_id: str, fail: bool) -> None:
    conn.execute(
        text(
            "INSERT INTO threads (id, status, created_at, updated_at, metadata) "
            "VALUES (:id, 'idle', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '{}')"
        ),
        {"id": thread_id},
    )
    if fail:
        raise RuntimeError("after the insert")


async def test_a_transaction_commits_when_it_returns_and_rolls_back_when_it_raises(engine: Any) -> None:
    store = HostStore(make_session_factory(engine))
    tx = transactions_for(engine)
    try:
        await tx.write(_insert_then, "kept", False)
        with pytest.raises(RuntimeError, match="after the insert"):
            await tx.write(_insert_then, "undone", True)
        assert await store.get_thread("kept") is not None
        assert await store.get_thread("undone") is None
    finally:
        await tx.aclose()
        await store.aclose()


async def test_the_sqlite_twin_opens_its_connection_as_the_engine_does(tmp_path: Any) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    tx = transactions_for(engine)

    def pragmas(conn: Connection) -> tuple[Any, ...]:
        names = ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")
        return tuple(conn.exec_driver_sql(f"PRAGMA {name}").scalar() for name in names)

    try:
        async with engine.connect() as conn:
            theirs = await conn.run_sync(pragmas)
        assert await tx.read(pragmas) == theirs == ("wal", 1, 30000, 1)
    finally:
        await tx.aclose()
        await engine.dispose()


async def test_concurrent_writers_through_the_thread_all_land(engine: Any) -> None:
    """Many runs' transactions at once: each is one hand-off, none fails on SQLite's lock."""
    store = HostStore(make_session_factory(engine))
    try:
        made = await asyncio.gather(*(store.create_thread({"n": n}, thread_id=f"t-{n}") for n in range(40)))
        await asyncio.gather(*(store.create_run(t.id, f"r-{t.id}", {"messages": []}, owner="me") for t in made))
        started = await asyncio.gather(*(store.mark_started(f"r-{t.id}", t.id) for t in made))
        assert all(started)
        assert {(await store.get_thread(t.id)).status for t in made} == {"busy"}  # type: ignore[union-attr]
    finally:
        await store.aclose()


async def test_a_closed_sqlite_store_refuses_work_and_its_thread_is_gone(tmp_path: Any) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    await upgrade_head(engine)
    store = HostStore(make_session_factory(engine))
    thread = await store._tx.read(lambda conn: threading.current_thread())
    await store.aclose()
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        await store.get_thread("t")
    await engine.dispose()
