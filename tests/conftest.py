"""Shared test setup: make helper modules under ``tests/`` importable by dotted path, and
keep what must run together on one pytest-xdist worker (``worker_groups``).

Extensions are configured by ``use: "module:attr"``, so test helper extensions must be
importable like installed code: ``extensions.fixtures_plugins:good`` resolves from here.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent

if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


from pg_support import PG_UNREACHABLE, fresh_database  # noqa: E402  (needs TESTS_DIR on sys.path)
from redis_support import REDIS_UNREACHABLE, REDIS_URL  # noqa: E402


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (``nox -s tests``) as pytest-xdist does it, but with the files of a
    ``worker_groups.SAME_WORKER`` group on one worker (tests/worker_scheduling.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    # Imported here: pytest-xdist is in the nox session alone, and this runs only under it.
    from worker_scheduling import FileGroupScheduling

    return FileGroupScheduling(config, log)


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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database for one test."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'deer-flow' / 'deerflow.db'}"
        return
    if PG_UNREACHABLE:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database() as name:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[Any]:
    """The host's engine on ``database_url``, migrated to head; disposed after the test."""
    from deerflow_ext.persistence import create_engine, upgrade_head

    made = create_engine(database_url)
    try:
        await upgrade_head(made)
        yield made
    finally:
        await made.dispose()


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
