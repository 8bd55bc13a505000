"""Migrations, autogenerate exclusion of extension tables, crash recovery, the checkpointer."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from gw_fixtures import FakeAgentHost, extensions_with

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.gateway.app import create_app
from deerflow_ext.persistence import (
    HOST_TABLES,
    Base,
    HostStore,
    create_engine,
    host_include_object,
    is_sqlite,
    make_session_factory,
    open_checkpointer,
    upgrade_head,
)

EXTENSION_METADATA = sa.MetaData()
sa.Table(
    "acme_events",
    EXTENSION_METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("kind", sa.Text),
)
sa.Table("acme_alembic_version", EXTENSION_METADATA, sa.Column("version_num", sa.String(32), primary_key=True))
sa.Index("ix_acme_events_kind", EXTENSION_METADATA.tables["acme_events"].c.kind)


def _diff(connection: sa.Connection, prefixes: tuple[str, ...] | None) -> list:
    opts = {} if prefixes is None else {"include_object": host_include_object(prefixes)}
    context = MigrationContext.configure(connection, opts={"compare_type": True, **opts})
    return compare_metadata(context, Base.metadata)


async def test_autogenerate_leaves_extension_tables_alone(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await upgrade_head(engine, table_prefixes=("acme_",))
        await upgrade_head(engine, table_prefixes=("acme_",))  # idempotent
        async with engine.begin() as conn:
            await conn.run_sync(EXTENSION_METADATA.create_all)
        async with open_checkpointer(database_url):
            pass  # the checkpointer's tables share the database too
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff, ("acme_",)) == []
            # Without the filter the same comparison proposes dropping the extension's table:
            # the assertion above is not vacuous.
            unfiltered = await conn.run_sync(_diff, None)
        dropped = {d[1].name for d in unfiltered if d[0] == "remove_table"}
        assert "acme_events" in dropped
    finally:
        await engine.dispose()


async def test_orphaned_runs_are_marked_interrupted(database_url: str) -> None:
    import socket

    engine = create_engine(database_url)
    try:
        await upgrade_head(engine)
        store = HostStore(make_session_factory(engine))
        thread = await store.create_thread()
        dead = f"{socket.gethostname()}:999999:deadbeef"  # no such pid
        elsewhere = "some-other-host:1:cafe"
        await store.create_run(thread.id, "dead-run", {}, owner=dead)
        await store.mark_started("dead-run", thread.id)
        await store.create_run(thread.id, "remote-run", {}, owner=elsewhere)
        assert await store.interrupt_orphaned_runs() == ("dead-run",)
        run = await store.get_run(thread.id, "dead-run")
        assert run is not None and (run.status, run.outcome) == ("interrupted", "aborted")
        remote = await store.get_run(thread.id, "remote-run")
        assert remote is not None and remote.status == "pending"
        assert (await store.get_thread(thread.id)).status == "interrupted"
    finally:
        await engine.dispose()


def test_host_tables_name_every_table() -> None:
    assert {"threads", "runs", "alembic_version", "checkpoints"} <= set(HOST_TABLES)
    assert set(Base.metadata.tables) <= set(HOST_TABLES)


def test_sqlite_folder_is_created(tmp_path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'a' / 'b' / 'x.db'}"
    engine = create_engine(url)
    assert (tmp_path / "a" / "b").is_dir()
    engine.sync_engine.dispose()


async def test_sqlite_connections_sync_the_log_at_checkpoints_not_every_commit(tmp_path) -> None:
    """Both writers (host tables and checkpointer) run WAL with ``synchronous=NORMAL``:
    ``FULL`` cost an fsync per commit, about ten per run."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
            assert (await conn.exec_driver_sql("PRAGMA synchronous")).scalar() == 1  # NORMAL
    finally:
        await engine.dispose()
    async with open_checkpointer(url) as saver:
        row = await saver.thread.run(lambda: saver.conn.execute("PRAGMA synchronous").fetchone())
        assert row[0] == 1


async def test_the_store_keeps_the_configured_pool_of_server_connections(settings_for, database_url: str) -> None:
    """``DEERFLOW_DATABASE_POOL_SIZE`` (10) sizes the store's pool on a database server; SQLite
    keeps SQLAlchemy's own."""
    for size in (10, 3):
        app = create_app(
            settings_for(database_pool_size=size),
            config=AppConfig(),
            extensions=extensions_with(),
            agent_host_factory=lambda config, checkpointer: FakeAgentHost(),
        )
        async with live_server(app):
            pool = app.state.runtime.engine.pool
            assert pool.size() == (5 if is_sqlite(database_url) else size)
