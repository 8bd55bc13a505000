"""The thread TTL sweep over the host store's transactions, on a real database (SQLite, and
PostgreSQL when reachable): bounded batches, activity and live runs re-arm instead of
deleting, and on PostgreSQL two processes sweeping at once never take one row twice."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from deerflow_ext.expiry import ThreadExpiry
from deerflow_ext.expiry import threads as threads_module
from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.persistence.models import ThreadRow
from deerflow_ext.persistence.records import ThreadTTL

THREADS: Any = ThreadRow.__table__


class Pruned:
    """A checkpointer that records what it was asked to prune."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def aprune(self, thread_ids: list[str], *, strategy: str) -> None:
        self.calls.append((strategy, list(thread_ids)))


async def _expire(engine: sa.ext.asyncio.AsyncEngine, ids: list[str]) -> None:
    """Make ``ids`` idle and past their time to live (as if an hour went by)."""
    past = datetime.now(UTC) - timedelta(hours=1)
    async with engine.begin() as conn:
        await conn.execute(sa.update(THREADS).where(THREADS.c.id.in_(ids)).values(updated_at=past, expires_at=past))


async def _ids(engine: sa.ext.asyncio.AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set((await conn.execute(sa.select(THREADS.c.id))).scalars())


async def test_a_sweep_takes_bounded_batches_and_spares_the_active_and_the_running(
    engine: sa.ext.asyncio.AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads_module, "BATCH", 4)
    store = HostStore(make_session_factory(engine))
    ttl = ThreadTTL("delete", 10.0)
    doomed = [(await store.create_thread(ttl=ttl)).id for _ in range(9)]
    pruned = (await store.create_thread(ttl=ThreadTTL("keep_latest", 10.0))).id
    active = (await store.create_thread(ttl=ttl)).id
    running = (await store.create_thread(ttl=ttl)).id
    forever = (await store.create_thread()).id
    await _expire(engine, [*doomed, pruned, active, running])
    async with engine.begin() as conn:  # active again since it was armed
        await conn.execute(sa.update(THREADS).where(THREADS.c.id == active).values(updated_at=datetime.now(UTC)))
    await store.create_run(running, "run-1", {}, owner="test:1:x")  # pending: live
    checkpointer = Pruned()
    expiry = ThreadExpiry(store.transactions, checkpointer, strategy="delete", limit=1000)
    taken = await expiry.sweep()
    assert sorted(taken.deleted) == sorted(doomed) and taken.kept == (pruned,)
    assert await _ids(engine) == {pruned, active, running, forever}
    # Batches of 4: each batch's checkpoints pruned on its own.
    assert [len(ids) for strategy, ids in checkpointer.calls if strategy == "delete"] == [4, 4, 1]
    assert ("keep_latest", [pruned]) in checkpointer.calls
    assert (await expiry.sweep()).examined == 0  # all re-armed: nothing due
    await store.aclose()


async def test_a_sweep_stops_at_its_limit(engine: sa.ext.asyncio.AsyncEngine) -> None:
    store = HostStore(make_session_factory(engine))
    ids = [(await store.create_thread(ttl=ThreadTTL("delete", 1.0))).id for _ in range(5)]
    await _expire(engine, ids)
    expiry = ThreadExpiry(store.transactions, None, strategy="delete", limit=3)
    assert len((await expiry.sweep()).deleted) == 3
    assert len((await expiry.sweep()).deleted) == 2
    await store.aclose()


@pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)  # SQLite serves one process
async def test_two_processes_sweeping_at_once_never_take_one_thread_twice(database_url: str) -> None:
    engines = [create_engine(database_url) for _ in range(2)]
    try:
        await upgrade_head(engines[0])
        stores = [HostStore(make_session_factory(engine)) for engine in engines]
        ids = [(await stores[0].create_thread(ttl=ThreadTTL("delete", 1.0))).id for _ in range(240)]
        await _expire(engines[0], ids)
        sweeps = [ThreadExpiry(store.transactions, None, strategy="delete", limit=1000) for store in stores]
        first, second = await asyncio.gather(sweeps[0].sweep(), sweeps[1].sweep())
        assert not set(first.deleted) & set(second.deleted)
        assert sorted(first.deleted + second.deleted) == sorted(ids)
        assert await _ids(engines[0]) == set()
        for store in stores:
            await store.aclose()
    finally:
        for engine in engines:
            await engine.dispose()
