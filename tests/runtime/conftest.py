"""Run-worker tests: a real ``HostStore`` on a fresh database (SQLite, and PostgreSQL when
reachable), the worker driven directly, without a Gateway in front of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.runtime import (
    LocalThreadCoordinator,
    MemoryStreamBridge,
    RunHandle,
    RunWorkerDeps,
    ThreadCoordinator,
)
from gateway import gw_fixtures


@pytest.fixture(autouse=True)
def _clear_events() -> Iterator[None]:
    gw_fixtures.EVENTS.clear()
    yield
    gw_fixtures.EVENTS.clear()


@dataclass
class Bench:
    """One database, its store and a stream bridge: what a worker needs besides the agent."""

    engine: Any
    store: HostStore
    streams: MemoryStreamBridge

    async def new_run(self, extensions: Any, thread_id: str | None = None) -> RunHandle:
        """A persisted ``pending`` run and its handle, as ``RunManager.start`` makes them."""
        thread = thread_id or (await self.store.create_thread()).id
        run_id = f"run-{len(await self.store.list_runs(thread))}-{thread[:8]}"
        record = await self.store.create_run(thread, run_id, {"messages": []}, owner="tests")
        return RunHandle(run_id, thread, extensions, self.streams.writer(run_id), created_at=record.created_at)

    def deps(self, agent_host: Any, coordinator: ThreadCoordinator | None = None, **options: Any) -> RunWorkerDeps:
        return RunWorkerDeps(
            store=self.store, coordinator=coordinator or LocalThreadCoordinator(), agent_host=agent_host, **options
        )

    async def events(self, run_id: str) -> list[str]:
        batch = await self.streams.read(run_id, None)
        return [e.event for e in batch.events]


@pytest.fixture
async def bench(database_url: str) -> AsyncIterator[Bench]:
    engine = create_engine(database_url)
    try:
        await upgrade_head(engine)
        yield Bench(engine, HostStore(make_session_factory(engine)), MemoryStreamBridge())
    finally:
        await engine.dispose()
