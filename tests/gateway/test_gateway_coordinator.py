"""ThreadCoordinator: one holder per thread, FIFO, cancellable waits; across engines on PG."""

from __future__ import annotations

import asyncio
import contextlib

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


async def test_postgres_hand_over_to_a_waiting_process_and_round_trips(database_url: str, caplog) -> None:
    """A free thread costs one statement to take and one to give back; a process waiting
    for the lock gets it with no takeover of the releasing process (whose lease row is
    deleted before the lock is let go, in that same statement)."""
    if is_sqlite(database_url):
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite uses the local coordinator")
    from sqlalchemy import event, text

    from deerflow_ext.persistence import upgrade_head

    engines = [create_engine(database_url), create_engine(database_url)]
    try:
        await upgrade_head(engines[0])
        a = PostgresThreadCoordinator(engines[0], owner="process-a")
        b = PostgresThreadCoordinator(engines[1], owner="process-b")
        statements: list[str] = []
        event.listen(a._engine.sync_engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        async with a.hold("free", "r-free"):
            pass
        assert len(statements) == 2, statements

        async def waiting() -> int:
            async with engines[0].connect() as probe:
                sql = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                return int((await probe.execute(text(sql))).scalar_one())

        caplog.set_level("WARNING", logger="deerflow_ext.runtime")

        async def holder(run_id: str, held: asyncio.Event, release: asyncio.Event) -> None:
            async with a.hold("t", run_id):
                held.set()
                await release.wait()

        for i in range(5):
            held, release = asyncio.Event(), asyncio.Event()
            first = asyncio.create_task(holder(f"a-{i}", held, release))
            await held.wait()
            second = asyncio.create_task(_enter(b, f"b-{i}"))
            for _ in range(500):
                if await waiting():
                    break  # b's session waits for the lock a holds
                await asyncio.sleep(0.01)
            else:
                pytest.fail("process b never waited for the thread")
            release.set()
            await asyncio.wait_for(asyncio.gather(first, second), 10)
        assert not [r for r in caplog.records if "taken over" in r.getMessage()]
        async with engines[0].connect() as probe:
            assert (await probe.execute(text("SELECT count(*) FROM thread_leases"))).scalar_one() == 0
        await a.aclose()
        await b.aclose()
    finally:
        for engine in engines:
            await engine.dispose()


async def _lease_pids(engine) -> list[int]:
    from sqlalchemy import text

    async with engine.connect() as probe:
        return list((await probe.execute(text("SELECT DISTINCT backend_pid FROM thread_leases"))).scalars())


async def test_postgres_free_threads_share_one_session_and_lose_it_together(database_url: str) -> None:
    """Holds of free threads take their locks on one session of the process; when that
    session dies, every one of them is fenced (its task cancelled), and the next hold opens
    a new one."""
    if is_sqlite(database_url):
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite uses the local coordinator")
    from sqlalchemy import text

    from deerflow_ext.persistence import upgrade_head

    engine = create_engine(database_url)
    try:
        await upgrade_head(engine)
        coordinator = PostgresThreadCoordinator(engine, owner="process-a", lease_seconds=1.5)
        inside: list[str] = []

        async def hold_forever(thread_id: str) -> None:
            async with coordinator.hold(thread_id, f"run-{thread_id}"):
                inside.append(thread_id)
                await asyncio.sleep(60)

        holders = [asyncio.create_task(hold_forever(f"t{i}")) for i in range(5)]
        await wait_until(lambda: len(inside) == 5)
        (pid,) = await _lease_pids(engine)  # five threads, one session
        async with engine.connect() as probe:
            await probe.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        done, pending = await asyncio.wait(holders, timeout=5)
        assert not pending, "a hold outlived the session its lock was on"
        assert all(task.cancelled() for task in done)

        async with coordinator.hold("t0", "after"):  # a new session
            async with engine.connect() as probe:
                sql = "SELECT backend_pid FROM thread_leases WHERE run_id = 'after'"
                assert (await probe.execute(text(sql))).scalar_one() != pid
        await coordinator.aclose()
    finally:
        await engine.dispose()


async def test_postgres_a_hold_cancelled_while_taking_gives_the_lock_back(database_url: str) -> None:
    """A cancel that lands while the lock is being taken on the shared session never leaves
    it held there (another process gets the thread at once) and fences nobody else."""
    if is_sqlite(database_url):
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite uses the local coordinator")
    from deerflow_ext.persistence import upgrade_head

    engines = [create_engine(database_url), create_engine(database_url)]
    try:
        await upgrade_head(engines[0])
        a = PostgresThreadCoordinator(engines[0], owner="process-a")
        b = PostgresThreadCoordinator(engines[1], owner="process-b")
        bystander_in = asyncio.Event()

        async def bystander() -> None:
            async with a.hold("other", "bystander"):
                bystander_in.set()
                await asyncio.sleep(60)

        standing = asyncio.create_task(bystander())
        await bystander_in.wait()
        for turns in range(8):  # the cancel lands at a different step each time
            attempt = asyncio.create_task(_enter(a, f"cancelled-{turns}"))
            for _ in range(turns):
                await asyncio.sleep(0)
            attempt.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await attempt
            async with asyncio.timeout(5):  # never the lease's 10 s: nothing was left behind
                await _enter(b, f"b-{turns}")
        assert not standing.done(), "the other hold on the shared session was fenced"
        standing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await standing
        await a.aclose()
        await b.aclose()
    finally:
        for engine in engines:
            await engine.dispose()


async def test_postgres_a_hold_whose_shared_session_just_died_takes_a_new_one(database_url: str, caplog) -> None:
    """A session found gone when the statement's turn comes took nothing: the hold tries once
    more on a new session instead of failing its run, and logs no error."""
    if is_sqlite(database_url):
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite uses the local coordinator")
    from deerflow_ext.persistence import upgrade_head
    from deerflow_ext.runtime.lock_session import LockSession

    engine = create_engine(database_url)
    try:
        await upgrade_head(engine)
        coordinator = PostgresThreadCoordinator(engine, owner="process-a")
        dead = await LockSession.open(coordinator._engine)
        await dead.drop()
        assert not dead.alive
        fresh = coordinator._shared_session
        handed = iter([dead])

        async def first_a_dead_one() -> LockSession:
            return next(handed, None) or await fresh()

        coordinator._shared_session = first_a_dead_one  # type: ignore[method-assign]
        caplog.set_level("WARNING", logger="deerflow_ext.runtime")
        async with asyncio.timeout(5):
            await _enter(coordinator, "r-1")
        assert coordinator._shared is not None and coordinator._shared is not dead
        assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
        await coordinator.aclose()
    finally:
        await engine.dispose()
