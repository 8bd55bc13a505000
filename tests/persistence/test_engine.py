"""The engine's connection handling: what a pooled connection carries from one use to the next."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from deerflow_ext.persistence import create_engine


async def test_a_sqlite_connection_returned_inside_a_transaction_is_rolled_back(tmp_path: Path) -> None:
    # The pool skips the rollback after a commit; a connection that comes back with a
    # transaction open (begun on the driver, unknown to SQLAlchemy) must still lose it, or
    # its write would commit with a later user's and the SQLite write lock would be held.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}", pool_size=1, max_overflow=0)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER)"))
        async with engine.connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            await driver.execute("BEGIN")
            await driver.execute("INSERT INTO t VALUES (1)")
            assert driver.in_transaction
        async with engine.connect() as conn:
            assert (await conn.get_raw_connection()).driver_connection is driver, "the same pooled connection"
            assert not driver.in_transaction
            assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar() == 0
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t VALUES (2)"))
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT x FROM t"))).scalars().all() == [2]
    finally:
        await engine.dispose()
