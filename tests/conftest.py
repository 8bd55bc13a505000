"""Shared test setup: make helper modules under ``tests/`` importable by dotted path.

Extensions are configured by ``use: "module:attr"``, so test helper extensions must be
importable like installed code: ``extensions.fixtures_plugins:good`` resolves from here.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent

if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


from redis_support import REDIS_UNREACHABLE, REDIS_URL  # noqa: E402  (needs TESTS_DIR on sys.path)


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix of this test's own on the local Redis; its keys are deleted afterwards.

    Skips, saying why, when Redis does not answer (CI starts it: ``.ci/run``)."""
    if REDIS_UNREACHABLE:
        pytest.skip(REDIS_UNREACHABLE)
    import redis

    prefix = f"dfx-test:{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def _pg_reason() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN, connect_timeout=2):
            return None
    except Exception as exc:
        return f"PostgreSQL at 127.0.0.1:5432 is not reachable ({type(exc).__name__}: {exc})"


_PG_UNREACHABLE = _pg_reason()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database for one test."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'deer-flow' / 'deerflow.db'}"
        return
    if _PG_UNREACHABLE:
        pytest.skip(_PG_UNREACHABLE)
    import psycopg

    name = f"dfx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Commands run in-process install the process's logging setup (``deerflow_ext.logs``);
    put the root logger and the loggers it touches back as they were after each test."""
    from deerflow_ext.logs import logging_config

    root = logging.getLogger()
    names = list(logging_config()["loggers"])
    saved = (list(root.handlers), root.level, {name: logging.getLogger(name).level for name in names})
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)
