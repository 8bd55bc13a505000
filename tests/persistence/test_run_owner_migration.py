"""Migration 0011 on a database with runs from before it: each run is the default principal's,
the journal table is created empty, and the step downgrades cleanly."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command

from deerflow_ext.persistence import alembic_config, create_engine


async def test_runs_before_0011_belong_to_the_default_principal(database_url: str) -> None:
    engine = create_engine(database_url)

    def step(connection: sa.Connection, target: str, down: bool = False) -> None:
        config = alembic_config(connection=connection)
        (command.downgrade if down else command.upgrade)(config, target)

    try:
        async with engine.begin() as conn:
            await conn.run_sync(step, "0009")
            await conn.execute(
                sa.text(
                    "INSERT INTO threads (id, status, created_at, updated_at, metadata) "
                    "VALUES ('t', 'idle', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '{}')"
                )
            )
            await conn.execute(
                sa.text(
                    "INSERT INTO runs (id, thread_id, status, input, input_tokens, output_tokens, total_tokens, "
                    "created_at) VALUES ('r', 't', 'success', '{}', 0, 0, 0, CURRENT_TIMESTAMP)"
                )
            )
            await conn.run_sync(step, "0011")
            owner = (await conn.execute(sa.text("SELECT user_id FROM runs WHERE id = 'r'"))).scalar_one()
            assert owner == "default"
            assert (await conn.execute(sa.text("SELECT COUNT(*) FROM run_events"))).scalar_one() == 0
            await conn.run_sync(step, "0009", True)
            columns = await conn.run_sync(lambda c: {col["name"] for col in sa.inspect(c).get_columns("runs")})
            tables = await conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
            assert "user_id" not in columns and "run_events" not in tables
    finally:
        await engine.dispose()
