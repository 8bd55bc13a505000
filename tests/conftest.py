"""Shared test setup: make helper modules under ``tests/`` importable by dotted path, and
keep what must run together on one pytest-xdist worker.

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


from pg_support import PG_UNREACHABLE, fresh_database  # noqa: E402  (needs TESTS_DIR on sys.path)
from redis_support import REDIS_UNREACHABLE, REDIS_URL  # noqa: E402

SAME_WORKER = {
    # They pip-install packages into the environment the suite runs in, or diff its installed
    # distributions: one install must not land in the middle of another case.
    "site-packages": ("e2e/", "cli/test_install_remove.py"),
    # Each drives a Chromium: two at once is all of a small machine for nothing.
    "browser": ("gateway/test_gateway_docs.py", "gateway/test_browser_client.py"),
}
"""Test paths (under tests/, a folder or a file) whose modules one xdist worker runs, in order."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``nox -s tests`` runs ``-n 2 --dist loadgroup``): a module's cases
    stay together on one worker, in order, as they run serially (its module-scoped server
    starts once), and the modules of a ``SAME_WORKER`` group share a worker. A serial run
    (plain ``pytest``) is left as it is."""
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        try:
            path = item.path.relative_to(TESTS_DIR).as_posix()
        except ValueError:  # a test file named from outside tests/
            path = item.nodeid.split("::")[0]
        group = next((name for name, paths in SAME_WORKER.items() if path.startswith(paths)), path)
        item.add_marker(pytest.mark.xdist_group(group))


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
