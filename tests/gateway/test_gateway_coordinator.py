"""ThreadCoordinator: one holder per thread, FIFO, cancellable waits; across engines on PG."""

from __future__ import annotations

import asyncio

import pytest

from deerflow_ext.persistence import create_engine, is_sqlite
from deerflow_ext.runtime import LocalThreadCoordinator, MemoryStreamBridge, PostgresThreadCoordinator
from deerflow_ext.runtime.stream import follow
from deerflow_ext.testing import wait_until


async def _exclusive(coordinators, thread_id: str = "t") -> list[str]:
    """Six holders over ``coordinators`` in turn, each started once the previous one asked.

    Asking and queueing on the local lock happen in one step (no await between them), so
    once a holder has asked it is in the queue: FIFO is tested, not the scheduler.
    """
    log: list[str] = []
    active = 0
    asked: list[str] = []

    async def run(coordinator, name: str) -> None:
        nonlocal active
        asked.append(name)
        async with coordinator.hold(thread_id, name):
            active += 1
            assert active == 1, "two holders of one thread"
            log.append(f"in:{name}")
            await asyncio.sleep(0.02)  # the behaviour: a hold that spans the others' requests
            log.append(f"out:{name}")
            active -= 1

    tasks = []
    for i in range(6):
        tasks.append(asyncio.create_task(run(coordinators[i % len(coordinators)], f"r{i}")))
        await wait_until(lambda n=i + 1: len(asked) == n)
    await asyncio.gather(*tasks)
    return log


async def test_local_hold_is_exclusive_fifo_and_cancellable() -> None:
    coordinator = LocalThreadCoordinator()
    log = await _exclusive([coordinator])
    assert log == [f"{kind}:r{i}" for i in range(6) for kind in ("in", "out")]

    async with coordinator.hold("t", "a"):
        waiter = asyncio.create_task(_enter(coordinator, "b"))
        await wait_until(lambda: coordinator._users.get("t") == 2)  # "a" holds, "b" is queued
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert coordinator.holder("t") == "a"
    async with coordinator.hold("other", "c"):  # other threads never wait
        async with asyncio.timeout(1):
            await _enter(coordinator, "d", thread_id="other2")
    assert coordinator._locks == {}  # nothing left behind


async def _enter(coordinator, run_id: str, thread_id: str = "t") -> None:
    async with coordinator.hold(thread_id, run_id):
        pass


async def test_postgres_holds_exclude_each_other_across_engines(database_url: str) -> None:
    if is_sqlite(database_url):
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite uses the local coordinator")
    # Two engines stand in for two Gateway processes: separate pools, separate sessions.
    engines = [create_engine(database_url), create_engine(database_url)]
    try:
        from deerflow_ext.persistence import upgrade_head

        await upgrade_head(engines[0])  # the holds write their leases to thread_leases
        coordinators = [PostgresThreadCoordinator(e) for e in engines]
        log = await _exclusive(coordinators)
        assert len(log) == 12
        assert all(log[i].startswith("in:") and log[i + 1] == "out:" + log[i][3:] for i in range(0, 12, 2))
        for coordinator in coordinators:
            await coordinator.aclose()  # each keeps a session for the locks it takes
    finally:
        for engine in engines:
            await engine.dispose()


async def _events(bridge: MemoryStreamBridge, run_id: str, after: str | None = None) -> list[str]:
    return [item.event async for item in follow(bridge, run_id, after, heartbeat=5) if item is not None]


async def test_stream_replays_history_and_ends() -> None:
    bridge = MemoryStreamBridge()
    stream = bridge.writer("r")
    await stream.publish("metadata", {"run_id": "r"})
    consumer = asyncio.create_task(_events(bridge, "r"))
    await asyncio.sleep(0)
    await stream.publish("values", {})
    await stream.close({"status": "success"})
    await stream.publish("late", {})
    assert await asyncio.wait_for(consumer, 1) == ["metadata", "values", "end"]
    assert await _events(bridge, "r") == ["metadata", "values", "end"]


async def test_failed_admission_persists_an_error_and_ends_the_stream(tmp_path) -> None:
    import contextlib

    from gw_fixtures import FakeAgentHost, LifecycleRecorder, extensions_with, kinds

    from deerflow_ext.persistence import HostStore, make_session_factory, upgrade_head
    from deerflow_ext.runtime import RunManager

    class BrokenCoordinator:
        @contextlib.asynccontextmanager
        async def hold(self, thread_id: str, run_id: str):
            raise ConnectionError("database went away")
            yield

        async def aclose(self) -> None:
            return None

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    try:
        await upgrade_head(engine)
        store = HostStore(make_session_factory(engine))
        thread = await store.create_thread()
        ext = extensions_with(lifecycle=LifecycleRecorder())
        runs = RunManager(
            store=store, agent_host=FakeAgentHost(), coordinator=BrokenCoordinator(), extensions=lambda: ext
        )
        handle = await runs.start(thread.id, messages=[{"role": "user", "content": "hi"}])
        events = await _events(runs.streams, handle.run_id)
        assert events == ["metadata", "error", "end"]
        run = await store.get_run(thread.id, handle.run_id)
        assert (run.status, run.outcome) == ("error", "failed") and "database went away" in run.error
        assert kinds(handle.run_id) == []  # never admitted: no hooks, no agent
    finally:
        await engine.dispose()
