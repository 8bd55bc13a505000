"""The local PostgreSQL the suite uses (CI starts it: ``.ci/run``), and a database of a test's own.

Kept apart from ``conftest.py`` so helper modules (the scale-out cluster) import it by name.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def _pg_reason() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN, connect_timeout=2):
            return None
    except Exception as exc:
        return f"PostgreSQL at 127.0.0.1:5432 is not reachable ({type(exc).__name__}: {exc})"


PG_UNREACHABLE = _pg_reason()
"""Why PostgreSQL cannot be used (the skip reason), or None when it answers."""


@contextlib.contextmanager
def fresh_database(prefix: str = "dfx_test") -> Iterator[str]:
    """A new, empty database with a unique name (parallel runs never share one), dropped after."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
