"""The PostgreSQL coordinator's locks: free threads on one shared session per process
(``runtime/lock_session.py``), a thread another process holds waited for on a connection of
its own, one statement to take a free thread and one to give it back. Two coordinators on
two engines stand in for two Gateway processes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, text

from deerflow_ext.persistence import create_engine, is_sqlite, upgrade_head
from deerflow_ext.runtime import PostgresThreadCoordinator
from deerflow_ext.runtime.lock_session import LockSession
from deerflow_ext.testing import wait_until

pytestmark = pytest.mark.postgres


@pytest.fixture
async def engines(database_url: str) -> AsyncIterator[list[Any]]:
    """Two engines on one fresh database: two processes' pools and sessions."""
    if is_sqlite(database_url):
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite uses the local coordinator")
    made = [create_engine(database_url), create_engine(database_url)]
    try:
        await upgrade_head(made[0])
        yield made
    finally:
        for engine in made:
            await engine.dispose()


@pytest.fixture
async def processes(engines: list[Any]) -> AsyncIterator[tuple[PostgresThreadCoordinator, PostgresThreadCoordinator]]:
    a = PostgresThreadCoordinator(engines[0], owner="process-a")
    b = PostgresThreadCoordinator(engines[1], owner="process-b")
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


async def _enter(coordinator: PostgresThreadCoordinator, run_id: str, thread_id: str = "t") -> None:
    async with coordinator.hold(thread_id, run_id):
        pass


# This database's advisory locks only: another test (or xdist worker) on the same server may
# hold its own at the same time, in a database of its own.
_THIS_DATABASE = "database = (SELECT oid FROM pg_database WHERE datname = current_database())"
_HELD = f"SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND {_THIS_DATABASE}"


async def _scalar(engine: Any, sql: str) -> Any:
    async with engine.connect() as probe:
        return (await probe.execute(text(sql))).scalar_one()


async def test_a_free_thread_costs_one_statement_each_way_and_a_waiter_gets_it(
    engines: list[Any], processes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A process waiting for the lock gets it with no takeover of the releasing process,
    and a hold writes no row: the lock alone says who holds the thread."""
    a, b = processes
    await _enter(a, "r-warm", thread_id="warm")  # the shared session is open
    through_sqlalchemy: list[str] = []
    event.listen(a._engine.sync_engine, "before_cursor_execute", lambda *args: through_sqlalchemy.append(args[2]))
    statements: list[str] = []
    a._shared._driver.add_query_logger(lambda query: statements.append(query.query))
    await _enter(a, "r-free", thread_id="free")
    await asyncio.sleep(0)  # asyncpg calls its query loggers soon after
    assert len(statements) == 2, statements
    assert through_sqlalchemy == [], "a hold's statements go by asyncpg alone"

    caplog.set_level("WARNING", logger="deerflow_ext.runtime")

    async def holder(run_id: str, held: asyncio.Event, release: asyncio.Event) -> None:
        async with a.hold("t", run_id):
            held.set()
            await release.wait()

    waiting = f"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND {_THIS_DATABASE}"
    for i in range(5):
        held, release = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(holder(f"a-{i}", held, release))
        await held.wait()
        second = asyncio.create_task(_enter(b, f"b-{i}"))
        for _ in range(500):
            if await _scalar(engines[0], waiting):
                break  # b's session waits for the lock a holds
            await asyncio.sleep(0.01)
        else:
            pytest.fail("process b never waited for the thread")
        release.set()
        await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert not [r for r in caplog.records if "taken over" in r.getMessage()]
    assert await _scalar(engines[0], "SELECT count(*) FROM thread_leases") == 0
    assert await _scalar(engines[0], _HELD.replace("DISTINCT pid", "count(*)")) == 0


async def test_holds_taken_together_have_their_statements_sent_back_to_back_in_order(processes: Any) -> None:
    """One task sends the session's statements, each as soon as the one before answered
    (no hand-over through each caller's wake-up), in the order they were asked for."""
    a, _ = processes
    await _enter(a, "r-warm", thread_id="warm")
    session = a._shared
    sent: list[tuple[str, str]] = []
    driver = session._driver

    class Spied:
        def __getattr__(self, name: str) -> Any:
            return getattr(driver, name)

        async def fetch(self, sql: str, *args: Any) -> Any:
            task = asyncio.current_task()
            sent.append(("give" if "unlock" in sql else "take", task.get_name() if task else "-"))
            return await driver.fetch(sql, *args)

    session._driver = Spied()
    try:
        await asyncio.gather(*(_enter(a, f"r-{n}", thread_id=f"t-{n}") for n in range(8)))
    finally:
        session._driver = driver
    assert [kind for kind, _ in sent[:8]] == ["take"] * 8, sent  # all asked before any answered
    assert {name for _, name in sent} == {"deerflow-lock-session"}, sent
    assert len(sent) == 16


async def test_free_threads_share_one_session_and_lose_it_together(engines: list[Any]) -> None:
    """When the shared session dies, every hold on it is fenced (its task cancelled), and
    the next hold opens a new one."""
    a = PostgresThreadCoordinator(engines[0], owner="process-a", lease_seconds=1.5)  # refreshes every 0.5 s
    try:
        await _share_and_lose(engines[0], a)
    finally:
        await a.aclose()


async def _share_and_lose(engine: Any, a: PostgresThreadCoordinator) -> None:
    inside: list[str] = []

    async def hold_forever(thread_id: str) -> None:
        async with a.hold(thread_id, f"run-{thread_id}"):
            inside.append(thread_id)
            await asyncio.sleep(60)

    holders = [asyncio.create_task(hold_forever(f"t{i}")) for i in range(5)]
    await wait_until(lambda: len(inside) == 5)
    pid = await _scalar(engine, _HELD)  # five threads, one session
    await _scalar(engine, f"SELECT pg_terminate_backend({int(pid)})")
    done, pending = await asyncio.wait(holders, timeout=5)
    assert not pending, "a hold outlived the session its lock was on"
    assert all(task.cancelled() for task in done)

    async with a.hold("t0", "after"):  # on a new session
        assert await _scalar(engine, _HELD) != pid


async def test_a_hold_cancelled_while_taking_gives_the_lock_back(processes: Any) -> None:
    """A cancel that lands while the lock is being taken on the shared session never leaves
    it held there (another process gets the thread at once) and fences nobody else."""
    a, b = processes
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


async def test_a_hold_whose_shared_session_just_died_takes_a_new_one(
    processes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A session found gone when the statement's turn comes took nothing: the hold tries once
    more on a new session instead of failing its run, and logs no error."""
    a, _ = processes
    dead = await LockSession.open(a._engine)
    await dead.drop()
    assert not dead.alive
    fresh = a._shared_session
    handed = iter([dead])

    async def first_a_dead_one() -> LockSession:
        return next(handed, None) or await fresh()

    a._shared_session = first_a_dead_one
    caplog.set_level("WARNING", logger="deerflow_ext.runtime")
    async with asyncio.timeout(5):
        await _enter(a, "r-1")
    assert a._shared is not None and a._shared is not dead
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


async def test_a_statement_whose_caller_stopped_waiting_still_runs_and_reports_how_it_ended(
    engines: list[Any], processes: Any
) -> None:
    """Callers await a statement's future directly (no shield: each is a turn of a busy
    loop); cancelling it stops only the wait. The statement still runs, and ``abandoned``
    is told how it ended."""
    a, _ = processes
    await _enter(a, "r-warm", thread_id="warm")
    session = a._shared
    ended: list[BaseException | None] = []
    took = session.start(text("SELECT pg_sleep(0.05), pg_advisory_lock(:k)"), {"k": 4242}, abandoned=ended.append)
    failing = session.start(text("SELECT 1 / (CAST(:k AS int) - 1)"), {"k": 1}, abandoned=ended.append)
    took.cancel()
    failing.cancel()
    await wait_until(lambda: len(ended) == 2)
    assert ended[0] is None and "division by zero" in str(ended[1])
    granted = (
        f"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted AND {_THIS_DATABASE}"
    )
    assert await _scalar(engines[0], granted) == 1, "the cancelled caller's statement did not run"


async def test_a_give_back_that_fails_after_its_holder_was_cancelled_still_ends_the_session(
    processes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The holder awaits its give-back directly; cancelled meanwhile, it leaves the
    statement's end to the session's ``abandoned`` callback, which ends the session when the
    give-back failed (its lock may still be held), so the thread is free for others."""
    a, b = processes
    await _enter(a, "r-warm", thread_id="warm")
    session = a._shared
    driver = session._driver
    unlocking, fail = asyncio.Event(), asyncio.Event()

    class Failing:
        def __getattr__(self, name: str) -> Any:
            return getattr(driver, name)

        async def fetch(self, sql: str, *args: Any) -> Any:
            if "unlock" in sql:
                unlocking.set()
                await fail.wait()
                raise ConnectionError("the give-back was refused")
            return await driver.fetch(sql, *args)

    session._driver = Failing()
    holder = asyncio.create_task(_enter(a, "r-1"))
    await unlocking.wait()
    holder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await holder
    assert session.alive
    fail.set()
    await wait_until(lambda: not session.alive)
    assert "releasing its hold failed" in caplog.text
    async with asyncio.timeout(5):  # the lock went with the session
        await _enter(b, "b-1")
