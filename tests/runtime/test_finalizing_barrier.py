"""The finalizing barrier, driven through the worker: a follow-up run on a thread starts its
lifecycle only after its predecessor's ``on_task_stop`` returned, in one process (the local
coordinator) and across processes sharing PostgreSQL (advisory locks, one engine each)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from deerflow_ext.persistence import HostStore, create_engine, is_sqlite, make_session_factory
from deerflow_ext.runtime import (
    LeadRunSpec,
    LocalThreadCoordinator,
    PostgresThreadCoordinator,
    RunWorkerDeps,
    ThreadCoordinator,
    execute_lead_run,
)
from deerflow_ext.testing import wait_until
from gateway.gw_fixtures import FakeAgentHost, LifecycleRecorder, extensions_with, kinds, when

SPEC = LeadRunSpec(messages=({"role": "user", "content": "hi"},))


class StartProbe(LifecycleRecorder):
    """Reads, when a run starts, how the thread's previous run was left."""

    def __init__(self, store: HostStore, stop_delay: float = 0.0) -> None:
        super().__init__(stop_delay)
        self.store = store
        self.previous_at_start: dict[str, tuple[str, str | None]] = {}

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        runs = await self.store.list_runs(info.thread_id)
        earlier = [r for r in runs if r.id != info.run_id]
        if earlier:
            self.previous_at_start[info.run_id] = (earlier[-1].status, earlier[-1].outcome)
        await super().on_task_start(app_store, task_store, info)


def _deps(store: HostStore, coordinator: ThreadCoordinator) -> RunWorkerDeps:
    return RunWorkerDeps(store=store, coordinator=coordinator, agent_host=FakeAgentHost())


@contextlib.asynccontextmanager
async def _two_processes(bench: Any, database_url: str) -> AsyncIterator[list[tuple[HostStore, ThreadCoordinator]]]:
    """Two (store, coordinator) pairs: one shared local coordinator on SQLite (one process);
    on PostgreSQL, two engines and two advisory-lock coordinators (two processes)."""
    if is_sqlite(database_url):
        local = LocalThreadCoordinator()
        yield [(bench.store, local), (bench.store, local)]
        return
    other = create_engine(database_url)
    coordinators = [
        PostgresThreadCoordinator(bench.engine, owner="process-a"),
        PostgresThreadCoordinator(other, owner="process-b"),
    ]
    try:
        for coordinator in coordinators:
            await coordinator.start()
        yield [(bench.store, coordinators[0]), (HostStore(make_session_factory(other)), coordinators[1])]
    finally:
        for coordinator in coordinators:
            await coordinator.aclose()
        await other.dispose()


async def test_a_follow_up_starts_only_after_its_predecessors_on_task_stop_returned(
    bench: Any, database_url: str
) -> None:
    async with _two_processes(bench, database_url) as processes:
        (store_a, hold_a), (store_b, hold_b) = processes
        probe = StartProbe(store_b, stop_delay=0.2)  # a slow on_task_stop is what the barrier waits for
        extensions = extensions_with(lifecycle=probe)
        first = await bench.new_run(extensions)
        second = await bench.new_run(extensions, thread_id=first.thread_id)

        running = asyncio.create_task(execute_lead_run(first, SPEC, _deps(store_a, hold_a)))
        await wait_until(lambda: "stop-begin" in kinds(first.run_id), timeout=10)
        follow_up = asyncio.create_task(execute_lead_run(second, SPEC, _deps(store_b, hold_b)))
        await asyncio.gather(running, follow_up)

    assert when("start", second.run_id) >= when("stop-end", first.run_id)
    assert probe.previous_at_start[second.run_id] == ("success", "completed")
    assert kinds(second.run_id) == ["start", "agent-begin", "agent-end", "stop-begin", "stop-end"]


async def test_runs_on_different_threads_do_not_wait_for_each_other(bench: Any) -> None:
    coordinator = LocalThreadCoordinator()
    slow_stop = LifecycleRecorder(stop_delay=30)  # holds its thread until cancelled
    first = await bench.new_run(extensions_with(lifecycle=slow_stop))
    other = await bench.new_run(extensions_with(lifecycle=LifecycleRecorder()))
    deps = bench.deps(FakeAgentHost(), coordinator, notify_budget=60)
    running = asyncio.create_task(execute_lead_run(first, SPEC, deps))
    await wait_until(lambda: "stop-begin" in kinds(first.run_id))

    async with asyncio.timeout(10):
        await execute_lead_run(other, SPEC, bench.deps(FakeAgentHost(), coordinator))

    assert coordinator.holder(first.thread_id) == first.run_id, "the first run is still finalizing"
    running.cancel()  # the shutdown drain giving up: a cancel cuts finalization short
    with pytest.raises(asyncio.CancelledError):
        await running
    assert coordinator.holder(first.thread_id) is None
