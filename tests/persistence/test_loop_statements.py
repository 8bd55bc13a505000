"""On PostgreSQL a run's writes and reads are one statement each, sent by asyncpg from the
event loop: no thread, no BEGIN or COMMIT, and rows that either driver reads back alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Connection, bindparam, event, select, text

from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.persistence.loop_statements import LOOP_CONNECTIONS, LoopStatements, compile_statement
from deerflow_ext.persistence.models import RunRow
from deerflow_ext.persistence.records import PROCESS_OWNER, ThreadNotFoundError, ThreadQuery
from deerflow_ext.persistence.transactions import EngineTransactions
from deerflow_ext.tokens import TokenUsage
from pg_support import PG_ADMIN


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[HostStore]:
    if database_url.startswith("sqlite"):
        pytest.skip("PostgreSQL's loop statements")
    engine = create_engine(database_url)
    await upgrade_head(engine)
    store = HostStore(make_session_factory(engine))
    try:
        yield store
    finally:
        await store.aclose()
        await engine.dispose()


def _log_every_connection(statements: LoopStatements, sent: list[str]) -> None:
    """Log what every connection ``statements`` opens from now on sends."""
    opener = statements._open

    async def logged() -> Any:
        connection = await opener()
        connection.add_query_logger(lambda query: sent.append(query.query))
        return connection

    statements._open = logged  # type: ignore[method-assign]


async def _connections(statements: LoopStatements) -> list[Any]:
    """The connections ``statements`` has open (each slot taken and put back)."""
    slots = [statements._slots.get_nowait() for _ in range(LOOP_CONNECTIONS)]
    for slot in slots:
        statements._slots.put_nowait(slot)
    return [slot for slot in slots if slot is not None]


async def test_each_write_and_read_of_a_run_is_one_statement_sent_from_the_loop(store: HostStore) -> None:
    loop_sent: list[str] = []
    transaction_sent: list[str] = []
    assert store._pg is not None and isinstance(store._tx, EngineTransactions)
    _log_every_connection(store._pg, loop_sent)

    def spy(_conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        transaction_sent.append(statement)

    event.listen(store._tx.engine.sync_engine, "before_cursor_execute", spy)
    try:
        calls = {
            "create_thread": lambda: store.create_thread({"ü": [1, {"x": None}]}, thread_id="t-1"),
            "create_run": lambda: store.create_run(
                "t-1", "r-0", {"messages": ["hi"]}, owner=PROCESS_OWNER, thread_defaults={"a": 1}
            ),
            "create_follow_up": lambda: store.create_follow_up(
                "t-1", "r-1", {}, owner=PROCESS_OWNER, action="interrupt", thread_defaults={"a": 2}
            ),
            "mark_started": lambda: store.mark_started("r-1", "t-1"),
            "finish_run": lambda: store.finish_run(
                "r-1", status="success", outcome="completed", answer="hi", tokens=TokenUsage(1, 2, 3),
                thread_id="t-1", thread_status="idle", title="Greeting",
            ),
            "get_run": lambda: store.get_run("t-1", "r-1"),
            "get_thread": lambda: store.get_thread("t-1"),
            "has_live_run": lambda: store.has_live_run("t-1"),
        }  # fmt: skip
        answers = {}
        for name, call in calls.items():
            loop_sent.clear()
            answers[name] = await call()
            await asyncio.sleep(0)  # asyncpg calls its query loggers soon after
            assert len(loop_sent) == 1, (name, loop_sent)
            assert loop_sent[0].split()[0] not in ("BEGIN", "COMMIT"), (name, loop_sent)
        assert transaction_sent == [], "nothing of a run's went through the store's transactions"
    finally:
        event.remove(store._tx.engine.sync_engine, "before_cursor_execute", spy)
    run, thread = answers["get_run"], answers["get_thread"]
    assert answers["has_live_run"] is True  # r-0 is still pending: its stop is only requested
    assert (run.status, run.outcome, run.answer, run.tokens) == ("success", "completed", "hi", TokenUsage(1, 2, 3))
    assert run.started_at is not None and run.finished_at is not None and run.owner == PROCESS_OWNER
    assert (thread.status, thread.title) == ("idle", "Greeting")
    assert thread.metadata == {"ü": [1, {"x": None}], "a": 1}, "the first run filled the default in"
    assert (await store.get_run("t-1", "r-0")).input == {"messages": ["hi"]}  # type: ignore[union-attr]
    # What the loop wrote, the transactions read alike, and the other way round.
    assert await store.cancel_requests(["r-0", "r-1"]) == {"r-0": "interrupt"}
    [listed] = await store.search_threads(ThreadQuery(ids=("t-1",)))
    assert listed == thread
    await store.update_thread_metadata("t-1", {"b": "ß"})
    assert (await store.get_thread("t-1")).metadata == {"ü": [1, {"x": None}], "a": 1, "b": "ß"}  # type: ignore[union-attr]
    # A run that is not pending is not started, and its thread stays as it is.
    assert await store.mark_started("r-1", "t-1") is False
    assert (await store.get_thread("t-1")).status == "idle"  # type: ignore[union-attr]
    with pytest.raises(ThreadNotFoundError):
        await store.create_run("t-none", "r-2", {}, owner=PROCESS_OWNER)
    assert await store.get_run("t-none", "r-2") is None


async def _waits_on_the_thread_alone(database_url: str, call: Any, run_id: str) -> None:
    """While another transaction holds the thread's row, ``call`` waits for it without
    having locked the run's: a run's writes lock its thread first, then its run, as a
    follow-up's insert does (thread, then its older runs), so no two of them deadlock."""
    libpq = database_url.replace("+asyncpg", "")
    with psycopg.connect(libpq) as holder, psycopg.connect(libpq) as prober:
        holder.execute("SELECT id FROM threads WHERE id = 't-1' FOR UPDATE")
        waiting = asyncio.ensure_future(call())
        for _ in range(100):  # until PostgreSQL shows the call waiting on a lock
            await asyncio.sleep(0.02)
            blocked = prober.execute(  # of this database: other suites' may wait on theirs meanwhile
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            prober.rollback()
            if blocked.fetchone() == (1,):
                break
        else:
            raise AssertionError("the call never waited on the thread's row")
        prober.execute("SET lock_timeout = '100ms'")
        prober.execute("SELECT id FROM runs WHERE id = %s FOR UPDATE", (run_id,))  # not held by the call
        prober.rollback()
        holder.rollback()
        await asyncio.wait_for(waiting, 10)


async def test_a_runs_start_and_end_lock_its_thread_before_the_run(store: HostStore, database_url: str) -> None:
    await store.create_thread(thread_id="t-1")
    await store.create_run("t-1", "r-1", {}, owner=PROCESS_OWNER)
    await _waits_on_the_thread_alone(database_url, lambda: store.mark_started("r-1", "t-1"), "r-1")
    assert (await store.get_run("t-1", "r-1")).status == "running"  # type: ignore[union-attr]

    def finish() -> Any:
        return store.finish_run("r-1", status="success", outcome="completed", thread_id="t-1", thread_status="idle")

    await _waits_on_the_thread_alone(database_url, finish, "r-1")
    assert (await store.get_run("t-1", "r-1")).status == "success"  # type: ignore[union-attr]
    assert (await store.get_thread("t-1")).status == "idle"  # type: ignore[union-attr]


async def test_a_connection_the_server_closed_is_replaced(store: HostStore) -> None:
    assert store._pg is not None
    await asyncio.gather(*(store.create_thread(thread_id=f"t-{n}") for n in range(LOOP_CONNECTIONS)))
    opened = await _connections(store._pg)
    assert len(opened) == LOOP_CONNECTIONS, "statements at once open a connection each"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        for connection in opened:
            admin.execute("SELECT pg_terminate_backend(%s)", (connection.get_server_pid(),))
    await asyncio.sleep(0.2)  # the loop reads the closed sockets
    for n in range(2 * LOOP_CONNECTIONS):  # every slot's turn comes
        await store.create_run(f"t-{n % LOOP_CONNECTIONS}", f"r-{n}", {}, owner=PROCESS_OWNER)
    assert (await store.get_run("t-0", "r-0")).status == "pending"  # type: ignore[union-attr]
    assert not set(await _connections(store._pg)) & set(opened)


async def test_a_cancelled_statement_is_cancelled_on_the_server_and_its_connection_serves_on(
    store: HostStore,
) -> None:
    assert store._pg is not None
    await store.create_thread(thread_id="t-1")
    sleeper = asyncio.ensure_future(store._pg.execute(text("SELECT pg_sleep(30)"), {}))
    await asyncio.sleep(0.2)
    sleeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sleeper
    for n in range(2 * LOOP_CONNECTIONS):  # the cancelled statement's connection among them
        await store.create_run("t-1", f"r-{n}", {}, owner=PROCESS_OWNER)
    assert len(await store.list_runs("t-1")) == 2 * LOOP_CONNECTIONS
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        sleeping = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(30)%'"
        ).fetchone()
    assert sleeping == (0,), "PostgreSQL still runs the cancelled statement"


async def test_closed_statements_say_so(store: HostStore) -> None:
    assert store._pg is not None
    await store.get_run("t-1", "r-1")
    await store._pg.aclose()
    assert await _connections(store._pg) == []
    with pytest.raises(RuntimeError, match="connections are closed"):
        await store.get_run("t-1", "r-1")


def test_a_statement_with_an_expanding_in_is_refused() -> None:
    with pytest.raises(ValueError, match="expanding IN"):
        compile_statement(select(RunRow.id).where(RunRow.status.in_(("a", "b"))), frozenset())


def test_a_statement_binds_its_own_literals_and_names_a_missing_value() -> None:
    compiled = compile_statement(select(RunRow.id).where(RunRow.status == "pending", RunRow.id == "x"), frozenset())
    assert compiled.values({}) == ["pending", "x"]
    wanting = compile_statement(select(RunRow.id).where(RunRow.id == bindparam("run_id")), frozenset())
    with pytest.raises(TypeError, match="run_id"):
        wanting.values({})
