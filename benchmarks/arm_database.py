"""An arm's own database: a SQLite file in the arm's folder, or a PostgreSQL database made
for it and dropped after, so arms measured side by side never share rows or caches."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg


@contextlib.contextmanager
def arm_database(postgres: str | None, tmp: Path, name: str) -> Iterator[str]:
    """The arm's database URL (``postgres``: a server URL ending in its admin database)."""
    if postgres is None:
        folder = tmp / f"{name}-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        yield f"sqlite+aiosqlite:///{folder / 'store.db'}"
        return
    database = f"bench_{name}_{uuid.uuid4().hex[:8]}".replace("-", "_")
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    base, _, _ = postgres.rpartition("/")
    try:
        yield f"{base.replace('postgresql://', 'postgresql+asyncpg://', 1)}/{database}"
    finally:
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
