"""The audit trail: its own migrations, its buffered writer, its router, in a real host."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import deerflow_audit
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from deerflow_audit import AuditBuffer, AuditSettings, AuditTrail, AuditWriter, OutcomeRecord, metadata
from deerflow_audit.migrate import alembic_config, include_object, upgrade
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from deerflow_extension_api import ExtensionData, ExtensionRuntimeDeps, TaskInfo, TaskOutcome


def test_settings_refuse_a_prefix_the_migrations_do_not_create() -> None:
    assert AuditSettings.from_config({"table_prefix": "audit_"}) == AuditSettings()
    with pytest.raises(ValueError, match="cannot rename"):
        AuditSettings.from_config({"table_prefix": "acme_"})
    with pytest.raises(ValueError, match="unknown audit config key"):
        AuditSettings.from_config({"flush_every": 1})


def test_own_chain_own_version_table_and_no_drift(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'a.db'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)"))
        conn.execute(text("INSERT INTO alembic_version VALUES ('host_head')"))
        conn.execute(text("CREATE TABLE threads (id VARCHAR PRIMARY KEY)"))  # someone else's table
        upgrade(conn)
        upgrade(conn)  # idempotent: already at head
    with engine.connect() as conn:
        names = set(inspect(conn).get_table_names())
        assert {"audit_task_outcomes", "audit_alembic_version"} <= names
        assert conn.execute(text("SELECT version_num FROM audit_alembic_version")).scalar() == "audit_0001"
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "host_head"
        context = MigrationContext.configure(conn, opts={"include_object": include_object})
        assert compare_metadata(context, metadata) == []  # the migration matches the model
    with engine.begin() as conn:
        from alembic import command

        command.downgrade(alembic_config(conn), "base")
    with engine.connect() as conn:
        assert "audit_task_outcomes" not in inspect(conn).get_table_names()
        assert "threads" in inspect(conn).get_table_names()
    engine.dispose()


def _record(task_id: str) -> OutcomeRecord:
    return OutcomeRecord(task_id, "r1", "th1", "lead", "completed", datetime.now(UTC))


def test_buffer_requeue_keeps_order() -> None:
    buffer = AuditBuffer()
    for name in ("a", "b", "c"):
        buffer.put(_record(name))
    taken = buffer.drain()
    buffer.put(_record("d"))
    buffer.requeue(taken)
    assert [r.task_id for r in buffer.drain()] == ["a", "b", "c", "d"]


def test_writer_writes_one_row_per_outcome_and_flushes_on_stop(tmp_path: Path) -> None:
    async def scenario() -> list[tuple[Any, ...]]:
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'w.db'}")
        app_store = ExtensionData("app")
        writer = AuditWriter(AuditSettings(flush_interval=30.0))  # only wake-ups and stop() write
        deps = ExtensionRuntimeDeps(app_store=app_store, session_factory=async_sessionmaker(engine))
        await writer.start(deps)
        trail = AuditTrail()
        info = TaskInfo("t1", "r1", "th1", "lead")
        await trail.on_task_start(app_store, ExtensionData("t1"), info)
        await trail.on_task_stop(app_store, ExtensionData("t1"), info, TaskOutcome.COMPLETED)
        for _ in range(100):
            if writer.written:
                break
            await asyncio.sleep(0.01)
        assert writer.written == 1  # woken by the hook, not by the 30 s tick
        sub = TaskInfo("t2", "r1", "th1", "subagent", parent_task_id="t1")
        await trail.on_task_stop(app_store, ExtensionData("t2"), sub, TaskOutcome.FAILED)
        await writer.stop()
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT task_id, kind, outcome FROM audit_task_outcomes"))).all()
        await engine.dispose()
        return [tuple(r) for r in rows]

    assert sorted(asyncio.run(scenario())) == [("t1", "lead", "completed"), ("t2", "subagent", "failed")]


def test_writer_refuses_to_start_without_a_database() -> None:
    with pytest.raises(RuntimeError, match="needs the host database"):
        asyncio.run(AuditWriter().start(ExtensionRuntimeDeps(app_store=ExtensionData("app"))))


def _sqlite_file(database_url: str) -> str:
    return database_url.split(":///", 1)[1]


def test_in_a_real_host_every_task_outcome_becomes_a_row(deerflow_host: Any) -> None:
    from deerflow_ext.testing import wait_for

    host = deerflow_host(deerflow_audit.install, {"flush_interval": 0.05}, required=True, table_prefix="audit_")
    outcome = host.run("delegate: check the ledger")

    def rows() -> list[dict[str, Any]]:
        body = host.client.get("/api/ext/audit/outcomes", params={"run_id": outcome.run_id}).json()
        return body["outcomes"] if len(body["outcomes"]) >= 2 else []

    listed = wait_for(rows)
    kinds = sorted((r["kind"], r["outcome"]) for r in listed)
    assert kinds == [("lead", "completed"), ("subagent", "completed")]
    assert {r["thread_id"] for r in listed} == {outcome.thread_id}
    with sqlite3.connect(_sqlite_file(host.database_url)) as db:
        query = "SELECT count(*) FROM audit_task_outcomes WHERE run_id = ?"
        (count,) = db.execute(query, (outcome.run_id,)).fetchone()
        (version,) = db.execute("SELECT version_num FROM audit_alembic_version").fetchone()
    assert (count, version) == (2, "audit_0001")
    assert not host.diagnostics.snapshot()
