"""The engine's connection handling: what a pooled connection carries from one use to the next."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from deerflow_ext.persistence import HostStore, create_engine, is_sqlite, make_session_factory, upgrade_head
from deerflow_ext.persistence.records import PROCESS_OWNER
from deerflow_ext.runtime import PostgresThreadCoordinator
from pg_support import PG_ADMIN


async def test_a_sqlite_connection_returned_inside_a_transaction_is_rolled_back(tmp_path: Path) -> None:
    # The pool skips the rollback after a commit; a connection that comes back with a
    # transaction open (begun on the driver, unknown to SQLAlchemy) must still lose it, or
    # its write would commit with a later user's and the SQLite write lock would be held.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}", pool_size=1, max_overflow=0)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER)"))
        async with engine.connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            await driver.execute("BEGIN")
            await driver.execute("INSERT INTO t VALUES (1)")
            assert driver.in_transaction
        async with engine.connect() as conn:
            assert (await conn.get_raw_connection()).driver_connection is driver, "the same pooled connection"
            assert not driver.in_transaction
            assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar() == 0
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t VALUES (2)"))
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT x FROM t"))).scalars().all() == [2]
    finally:
        await engine.dispose()


async def _restart_sessions(database: str) -> None:
    """What a PostgreSQL restart does to a Gateway's pools: every session of the database
    is terminated (the admin connection waits until they are gone, as a restart would)."""
    admin = create_async_engine(
        make_url(PG_ADMIN).set(drivername="postgresql+asyncpg"), isolation_level="AUTOCOMMIT", poolclass=NullPool
    )
    others = "FROM pg_stat_activity WHERE datname = :d AND pid <> pg_backend_pid()"
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f"SELECT pg_terminate_backend(pid) {others}"), {"d": database})
            for _ in range(100):
                if not (await conn.execute(text(f"SELECT count(*) {others}"), {"d": database})).scalar():
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"the sessions of {database} were not terminated")
    finally:
        await admin.dispose()
    await asyncio.sleep(0.1)  # the server is back; a real restart takes longer than this


async def test_the_store_and_thread_holds_survive_a_restarted_postgresql(database_url: str) -> None:
    if is_sqlite(database_url):
        pytest.skip("a PostgreSQL restart")
    engine = create_engine(database_url)
    coordinator = PostgresThreadCoordinator(engine, lease_seconds=5)
    try:
        await upgrade_head(engine)
        store = HostStore(make_session_factory(engine))
        thread = await store.create_thread(thread_id="t-1")
        async with coordinator.hold(thread.id, "r-0"):  # a lock connection, back in its pool after
            await asyncio.gather(*(store.get_thread(thread.id) for _ in range(3)))  # pooled ones

        await _restart_sessions(make_url(database_url).database or "")

        # The first request after the restart does not fail on a dead pooled connection.
        await store.create_run(thread.id, "r-1", {}, owner=PROCESS_OWNER)
        async with coordinator.hold(thread.id, "r-1"):
            assert await store.mark_started("r-1", thread.id)
            await asyncio.gather(*(store.get_thread(thread.id) for _ in range(3)))
        await store.finish_run("r-1", status="success", outcome="completed", thread_id=thread.id, thread_status="idle")
        assert (await store.get_run(thread.id, "r-1")).status == "success"
    finally:
        await coordinator.aclose()
        await engine.dispose()
