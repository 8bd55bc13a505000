"""Transaction functions run whole: SQLite's on the loop or one thread (loop-first), PostgreSQL's on the
host's own engine."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import pytest
from sqlalchemy import Connection, text

from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.persistence.transactions import EngineTransactions, ThreadTransactions, transactions_for
from deerflow_ext.persistence.wal_checkpoints import LOOP_CHECKPOINT_PAGES


async def test_a_sqlite_transaction_runs_whole_on_the_loop_when_nothing_waits(engine: Any) -> None:
    if engine.url.get_backend_name() != "sqlite":
        pytest.skip("SQLite's twin")
    tx = transactions_for(engine)
    try:
        assert isinstance(tx, ThreadTransactions)
        # Nothing handed over: made right here, on the loop.
        where = await tx.read(lambda conn: threading.get_ident())
        assert where == threading.get_ident() == await tx.write(lambda conn: threading.get_ident())
    finally:
        await tx.aclose()


async def test_a_postgres_transaction_waiting_for_a_row_lock_holds_up_nothing_else(engine: Any) -> None:
    """PostgreSQL's transactions run on the host's engine: one that waits for a row lock
    waits on the loop, and the other transactions and the loop go on meanwhile."""
    if engine.url.get_backend_name() == "sqlite":
        pytest.skip("PostgreSQL's transactions")
    tx = transactions_for(engine)
    try:
        assert isinstance(tx, EngineTransactions) and tx.engine is engine
        await tx.write(_insert_then, "locked", False)
        async with engine.connect() as holder:
            await holder.execute(text("SELECT id FROM threads WHERE id = 'locked' FOR UPDATE"))
            waiting = asyncio.ensure_future(
                tx.write(lambda conn: conn.execute(text("UPDATE threads SET status = 'busy' WHERE id = 'locked'")))
            )
            await asyncio.sleep(0.2)
            assert not waiting.done()
            await tx.write(_insert_then, "other", False)  # another transaction meanwhile
            assert await tx.read(lambda conn: conn.execute(text("SELECT count(*) FROM threads")).scalar()) == 2
            await holder.rollback()  # the lock is let go
        await asyncio.wait_for(waiting, 10)
        status = await tx.read(
            lambda conn: conn.execute(text("SELECT status FROM threads WHERE id = 'locked'")).scalar()
        )
        assert status == "busy"
    finally:
        await tx.aclose()


async def test_a_sqlite_transaction_meeting_another_connections_lock_waits_for_it_on_the_thread(
    tmp_path: Any,
) -> None:
    """The loop never waits for SQLite's lock: the transaction that meets it goes to the
    thread, which retries it until the lock is free, while the loop goes on."""
    path = tmp_path / "db.sqlite"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    await upgrade_head(engine)
    tx = transactions_for(engine)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
        ran_on: list[int] = []

        def insert(conn: Connection) -> None:
            ran_on.append(threading.get_ident())
            _insert_then(conn, "waited", False)

        write = asyncio.ensure_future(tx.write(insert))
        for _ in range(10):  # the loop keeps turning while the thread retries
            await asyncio.sleep(0.01)
        assert not write.done() and len(ran_on) >= 3
        other.execute("COMMIT")
        await asyncio.wait_for(write, 10)
        assert ran_on[0] == threading.get_ident() and threading.get_ident() not in ran_on[1:]
        assert await tx.read(lambda conn: conn.execute(text("SELECT id FROM threads")).scalars().all()) == ["waited"]
    finally:
        other.close()
        await tx.aclose()
        await engine.dispose()


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


async def test_the_sqlite_twin_opens_its_connection_as_the_engine_does_but_waits_for_no_lock_and_checkpoints_rarely(
    tmp_path: Any,
) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    tx = transactions_for(engine)

    def pragmas(conn: Connection) -> tuple[Any, ...]:
        names = ("journal_mode", "foreign_keys", "busy_timeout", "synchronous", "wal_autocheckpoint")
        return tuple(conn.exec_driver_sql(f"PRAGMA {name}").scalar() for name in names)

    try:
        async with engine.connect() as conn:
            theirs = await conn.run_sync(pragmas)
        assert theirs == ("wal", 1, 30000, 1, 1000)
        # Its lock waits happen on its thread, and its commits leave checkpoints to one.
        assert await tx.read(pragmas) == ("wal", 1, 0, 1, LOOP_CHECKPOINT_PAGES)
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
    ident = store._tx._thread.ident  # type: ignore[attr-defined]
    threads = [thread for thread in threading.enumerate() if thread.ident == ident]
    assert len(threads) == 1 and threads[0].name == "deerflow-host-sqlite"
    await store.aclose()
    assert not threads[0].is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        await store.get_thread("t")
    await engine.dispose()


async def test_the_sqlite_twin_keeps_its_connection_between_transactions_and_gives_it_back_on_an_error(
    tmp_path: Any,
) -> None:
    path = tmp_path / "db.sqlite"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    await upgrade_head(engine)
    tx = transactions_for(engine)
    assert isinstance(tx, ThreadTransactions)
    pool = tx.engine.pool

    def raw(conn: Connection) -> int:
        return id(conn.connection.dbapi_connection)

    try:
        first = await tx.write(raw)
        assert await tx.read(raw) == first == await tx.write(raw)
        assert pool.checkedout() == 1  # kept between transactions: no checkout per transaction
        with pytest.raises(RuntimeError, match="after the insert"):
            await tx.write(_insert_then, "undone", True)
        assert pool.checkedout() == 0  # the error gave it back (the pool reset it)...
        await tx.write(_insert_then, "kept", False)  # ...and the next transaction took it again
        assert await tx.read(raw) == first
        # A read ends what it began: the next write begins its own transaction, and another
        # connection's checkpoint is not held back by a snapshot.
        await tx.read(lambda conn: conn.execute(text("SELECT id FROM threads")).first())
        await tx.write(_insert_then, "after a read", False)
        other = sqlite3.connect(path)
        try:
            assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
        finally:
            other.close()
    finally:
        await tx.aclose()
    assert pool.checkedout() == 0
    await engine.dispose()
