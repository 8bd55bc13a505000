"""Who holds a PostgreSQL thread, and what happens when that process is gone.

A hold writes no row: the lock's session names its process (``application_name``), and the
process's heartbeat row says whether it is alive. These tests stand in for dead processes
with rows and sessions of their own: a run left ``running`` by an owner that no longer holds
the thread, a session holding a lock for a process whose heartbeat expired."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text

from deerflow_ext.persistence import is_sqlite
from deerflow_ext.runtime import PostgresThreadCoordinator
from deerflow_ext.runtime.coordinator import advisory_key
from deerflow_ext.runtime.pg_coordinator import application_name
from deerflow_ext.testing import wait_until

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _postgres_only(database_url: str) -> None:
    """Before the suite's ``engine`` migrates anything: these cases are PostgreSQL's."""
    if is_sqlite(database_url):
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite uses the local coordinator")


@pytest.fixture
async def coordinator(engine: Any) -> AsyncIterator[PostgresThreadCoordinator]:
    made = PostgresThreadCoordinator(engine, owner="process-a", lease_seconds=1.2)
    try:
        yield made
    finally:
        await made.aclose()


async def _execute(engine: Any, sql: str, **params: Any) -> None:
    async with engine.begin() as conn:
        await conn.execute(text(sql), params)


async def _statuses(engine: Any, *run_ids: str) -> dict[str, str]:
    async with engine.connect() as conn:
        rows = await conn.execute(text("SELECT id, status FROM runs WHERE id = ANY(:ids)"), {"ids": list(run_ids)})
        return dict(rows.all())


async def _thread(engine: Any, thread_id: str, status: str = "busy") -> None:
    await _execute(
        engine,
        "INSERT INTO threads (id, status, created_at, updated_at, metadata) VALUES (:t, :s, now(), now(), '{}')",
        t=thread_id,
        s=status,
    )


async def _run(engine: Any, run_id: str, thread_id: str, status: str, owner: str) -> None:
    await _execute(
        engine,
        "INSERT INTO runs (id, thread_id, status, input, input_tokens, output_tokens, total_tokens, "
        "created_at, owner) VALUES (:r, :t, :s, '{}', 0, 0, 0, now(), :o)",
        r=run_id,
        t=thread_id,
        s=status,
        o=owner,
    )


async def _heartbeat(engine: Any, owner: str, seconds_left: float) -> None:
    await _execute(
        engine,
        "INSERT INTO gateway_processes (owner, started_at, heartbeat_at, expires_at) "
        "VALUES (:o, now(), now(), now() + make_interval(secs => :s))",
        o=owner,
        s=seconds_left,
    )


async def test_the_take_interrupts_what_a_holder_that_let_go_unfinished_left(
    engine: Any, coordinator: PostgresThreadCoordinator, caplog: pytest.LogCaptureFixture
) -> None:
    """A run still running on a thread whose lock is free has no holder: the take interrupts
    it and its process's queued runs on the thread, in its one statement. Other processes'
    queued runs, this process's own runs and the run taking the thread are left alone."""
    await _thread(engine, "t")
    await _run(engine, "left-running", "t", "running", "gone")
    await _run(engine, "gone-queued", "t", "pending", "gone")
    await _run(engine, "other-queued", "t", "pending", "alive")
    await _run(engine, "mine", "t", "pending", "process-a")
    await _thread(engine, "u")
    await _run(engine, "own-running", "u", "running", "process-a")
    caplog.set_level("WARNING", logger="deerflow_ext.runtime")

    async with coordinator.hold("t", "mine"):
        assert await _statuses(engine, "left-running", "gone-queued", "other-queued", "mine") == {
            "left-running": "interrupted",
            "gone-queued": "interrupted",
            "other-queued": "pending",
            "mine": "pending",
        }
    async with coordinator.hold("u", "next"):
        assert await _statuses(engine, "own-running") == {"own-running": "running"}

    async with engine.connect() as conn:
        thread = (await conn.execute(text("SELECT status FROM threads WHERE id = 't'"))).scalar_one()
        error = (await conn.execute(text("SELECT error FROM runs WHERE id = 'left-running'"))).scalar_one()
    assert thread == "interrupted"
    assert "taken over" in error
    [report] = [r.getMessage() for r in caplog.records if "taken over" in r.getMessage()]
    assert "from gone" in report and "left-running" in report and "gone-queued" in report


@contextlib.asynccontextmanager
async def _foreign_holder(database_url: str, owner: str, thread_id: str) -> AsyncIterator[asyncpg.Connection]:
    """A session of process ``owner`` (named as its coordinator names its sessions) holding
    ``thread_id``'s lock: a frozen process's lingering connection."""
    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn, server_settings={"application_name": application_name(owner)})
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", advisory_key(thread_id))
        yield conn
    finally:
        with contextlib.suppress(Exception):
            await conn.close()


@pytest.mark.parametrize("heartbeat", ["expired", "forgotten"])
async def test_a_waiter_ends_the_session_of_a_process_whose_heartbeat_is_gone(
    database_url: str, engine: Any, coordinator: PostgresThreadCoordinator, heartbeat: str
) -> None:
    if heartbeat == "expired":
        await _heartbeat(engine, "frozen", -1.0)
    async with _foreign_holder(database_url, "frozen", "t") as lingering:
        async with asyncio.timeout(5):
            async with coordinator.hold("t", "r"):
                pass
        await wait_until(lingering.is_closed)


async def test_a_waiter_leaves_a_live_process_holding_its_thread(
    database_url: str, engine: Any, coordinator: PostgresThreadCoordinator
) -> None:
    """Several polls pass (every lease/4) without the holder's session being ended."""
    await _heartbeat(engine, "busy", 60.0)
    async with _foreign_holder(database_url, "busy", "t") as holding:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.5):
                async with coordinator.hold("t", "r"):
                    pass
        assert await holding.fetchval("SELECT 1") == 1


async def test_the_sweeper_interrupts_runs_left_running_by_dead_processes(
    database_url: str, engine: Any, coordinator: PostgresThreadCoordinator
) -> None:
    await _heartbeat(engine, "dead", -1.0)
    await _heartbeat(engine, "alive", 60.0)
    for thread_id, owner in (("t-dead", "dead"), ("t-forgotten", "forgotten"), ("t-alive", "alive")):
        await _thread(engine, thread_id)
        await _run(engine, f"run-{owner}", thread_id, "running", owner)
    await _thread(engine, "t-held")
    await _run(engine, "run-held", "t-held", "running", "dead")

    async with _foreign_holder(database_url, "dead", "t-held") as lingering:
        assert sorted(await coordinator.sweep()) == ["t-dead", "t-forgotten"]
        assert await _statuses(engine, "run-dead", "run-forgotten", "run-alive", "run-held") == {
            "run-dead": "interrupted",
            "run-forgotten": "interrupted",
            "run-alive": "running",
            "run-held": "running",  # its dead process's session still held the thread: ended now
        }
        await wait_until(lingering.is_closed)
    assert await coordinator.sweep() == ["t-held"]
    assert (await _statuses(engine, "run-held"))["run-held"] == "interrupted"


async def test_a_hold_whose_lock_is_gone_from_a_live_session_is_fenced(coordinator: PostgresThreadCoordinator) -> None:
    """The check every lease/3 asks whether the session still holds this thread's lock, not
    only whether the session answers."""
    inside = asyncio.Event()

    async def hold() -> None:
        async with coordinator.hold("t", "r"):
            inside.set()
            await asyncio.sleep(30)

    holding = asyncio.create_task(hold())
    await inside.wait()
    session = coordinator._shared
    assert session is not None
    await session.execute(text("SELECT pg_advisory_unlock_all()"))
    done, _ = await asyncio.wait((holding,), timeout=5)
    assert done and holding.cancelled(), "a hold ran on after its lock was gone"
    assert session.alive


async def test_application_name_is_what_sql_computes_from_the_owner(engine: Any) -> None:
    owner = "a-host-name-longer-than-sixty-three-bytes.example.internal:4242:0123abcd"
    async with engine.connect() as conn:
        named = (await conn.execute(text("SELECT 'deerflow-ext ' || md5(:o)"), {"o": owner})).scalar_one()
    assert named == application_name(owner)
    assert len(named.encode()) <= 63
