"""Settings come from DEERFLOW_* environment variables with documented defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from deerflow_ext.config.settings import (
    Settings,
    async_database_url,
    sqlite_database_path,
    sync_database_url,
)

VARS = (
    "DEERFLOW_CONFIG",
    "DEERFLOW_DATABASE_URL",
    "DEERFLOW_DATABASE_POOL_SIZE",
    "DEERFLOW_HOST",
    "DEERFLOW_PORT",
    "DEERFLOW_LOG_LEVEL",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARS:
        monkeypatch.delenv(name, raising=False)


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = Settings()
    assert s.config == Path("config.yaml")
    assert s.host == "127.0.0.1" and s.port == 8001 and s.log_level == "INFO"
    assert s.database_pool_size == 10
    assert s.database_url == f"sqlite+aiosqlite:///{tmp_path / '.deer-flow' / 'deerflow.db'}"
    assert sqlite_database_path(s.database_url) == tmp_path / ".deer-flow" / "deerflow.db"


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEERFLOW_CONFIG", "/etc/deerflow/config.yaml")
    monkeypatch.setenv("DEERFLOW_DATABASE_URL", "postgresql+asyncpg://u:p@db/deer")
    monkeypatch.setenv("DEERFLOW_HOST", "0.0.0.0")
    monkeypatch.setenv("DEERFLOW_PORT", "9000")
    monkeypatch.setenv("DEERFLOW_LOG_LEVEL", "debug")
    monkeypatch.setenv("DEERFLOW_DATABASE_POOL_SIZE", "40")
    s = Settings()
    assert s.database_pool_size == 40
    assert s.config == Path("/etc/deerflow/config.yaml")
    assert s.database_url == "postgresql+asyncpg://u:p@db/deer"
    assert s.sync_database_url == "postgresql+psycopg://u:p@db/deer"
    assert (s.host, s.port, s.log_level) == ("0.0.0.0", 9000, "DEBUG")


@pytest.mark.parametrize(
    ("var", "value"),
    [("DEERFLOW_PORT", "http"), ("DEERFLOW_LOG_LEVEL", "LOUD"), ("DEERFLOW_DATABASE_POOL_SIZE", "0")],
)
def test_bad_values_name_the_setting(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValidationError, match=var.removeprefix("DEERFLOW_").lower()):
        Settings()


@pytest.mark.parametrize(
    ("url", "sync", "async_"),
    [
        ("sqlite+aiosqlite:////x/db.sqlite", "sqlite:////x/db.sqlite", "sqlite+aiosqlite:////x/db.sqlite"),
        ("sqlite:///rel.db", "sqlite:///rel.db", "sqlite+aiosqlite:///rel.db"),
        ("postgresql://h/d", "postgresql://h/d", "postgresql+asyncpg://h/d"),
        ("postgresql+asyncpg://h/d", "postgresql+psycopg://h/d", "postgresql+asyncpg://h/d"),
        ("mysql://h/d", "mysql://h/d", "mysql://h/d"),
    ],
)
def test_driver_variants(url: str, sync: str, async_: str) -> None:
    assert sync_database_url(url) == sync
    assert async_database_url(url) == async_


def test_sqlite_path_edge_cases() -> None:
    assert sqlite_database_path("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_database_path("postgresql://h/d") is None
    assert sqlite_database_path("sqlite:///rel/x.db?mode=ro") == Path("rel/x.db")
