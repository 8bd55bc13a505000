"""Process settings from ``DEERFLOW_*`` environment variables.

``config.yaml`` describes *what* the Gateway runs (extensions, models, limits) and is edited
by operators; these settings describe *where* one process runs it (which file, which
database, which socket), so they come from the environment, where deployment tooling puts
such things. Both ``serve`` and the CLI read them, which is why the defaults live here once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .schema import long_enough_token

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_DATA_DIR",
    "Settings",
    "SettingsError",
    "async_database_url",
    "default_database_url",
    "load_settings",
    "sqlite_database_path",
    "sync_database_url",
]

DEFAULT_CONFIG_PATH = Path("config.yaml")
DEFAULT_DATA_DIR = Path(".deer-flow")

# Driver pairs: the Gateway talks to the database through SQLAlchemy's asyncio engine,
# while alembic and LangGraph's synchronous checkpointers need the blocking driver for the
# very same database. Keeping the mapping here means DEERFLOW_DATABASE_URL is written once,
# in either form, and every consumer derives the variant it needs.
_ASYNC_FOR_SYNC = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+pysqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgresql+psycopg": "postgresql+asyncpg",
    "postgresql+psycopg2": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}
_SYNC_FOR_ASYNC = {
    "sqlite+aiosqlite": "sqlite",
    "postgresql+asyncpg": "postgresql+psycopg",
    "postgresql+psycopg_async": "postgresql+psycopg",
}


def default_database_url() -> str:
    """A SQLite file under ``./.deer-flow/``, made absolute when the settings are read.

    Absolute because the Gateway, alembic and the CLI may resolve it from different working
    directories later; the directory itself is created by the persistence layer on first use.
    """
    return f"sqlite+aiosqlite:///{(Path.cwd() / DEFAULT_DATA_DIR / 'deerflow.db').as_posix()}"


def _split(url: str) -> tuple[str, str]:
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a database URL (no '://'): {url!r}")
    return scheme, rest


def async_database_url(url: str) -> str:
    """``url`` with its asyncio driver (``sqlite`` -> ``sqlite+aiosqlite``, ...); unknown ones unchanged."""
    scheme, rest = _split(url)
    return f"{_ASYNC_FOR_SYNC.get(scheme, scheme)}://{rest}"


def sync_database_url(url: str) -> str:
    """``url`` with its blocking driver (``sqlite+aiosqlite`` -> ``sqlite``, ...); unknown ones unchanged."""
    scheme, rest = _split(url)
    return f"{_SYNC_FOR_ASYNC.get(scheme, scheme)}://{rest}"


def sqlite_database_path(url: str) -> Path | None:
    """The file a SQLite URL points at (``None`` for other databases and ``:memory:``)."""
    scheme, rest = _split(url)
    if not scheme.startswith("sqlite"):
        return None
    path = rest[1:] if rest.startswith("/") else rest  # "sqlite:///x" -> rest "/x" -> "x"
    path = path.split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(path)


class Settings(BaseSettings):
    """Where this process finds its config file and database and which socket it serves on."""

    model_config = SettingsConfigDict(env_prefix="DEERFLOW_", extra="ignore", frozen=True)

    config: Path = Field(default=DEFAULT_CONFIG_PATH, description="path of config.yaml")
    database_url: str = Field(default_factory=default_database_url)
    #: Connections the async engine's pool keeps open to a database server (PostgreSQL; not
    #: for SQLite); up to 10 more open under a peak and close after it. It serves extensions'
    #: sessions and the host's statements off the run path; a run's own transactions use
    #: ``persistence.transactions.POSTGRES_THREADS`` connections of their own.
    database_pool_size: int = Field(default=10, ge=1)
    #: How long a commit waits for the disk, on every connection the Gateway opens:
    #: ``full`` (SQLite ``synchronous=FULL``, PostgreSQL ``synchronous_commit=on``: a crash
    #: loses no commit) or ``relaxed`` (``NORMAL`` / ``off``: an OS or database-server crash
    #: may lose the last commits, never corrupt). Unset: SQLite ``NORMAL``, PostgreSQL the
    #: server's own (``on``), as before the setting existed (``persistence.durability``).
    database_durability: Literal["full", "relaxed"] | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8001, ge=0, le=65535)
    log_level: str = "INFO"
    #: ``text`` (one line per record) or ``json`` (one object per line, uvicorn's included).
    log_format: Literal["text", "json"] = "text"
    #: Per-extension hook counters and ``GET /metrics`` (``DEERFLOW_METRICS=0`` switches both off).
    metrics: bool = True
    #: How long shutdown waits for in-flight HTTP requests before cancelling them. Without a
    #: bound, one hanging request (an extension route that never returns) keeps the Gateway
    #: from ever stopping; the ordered shutdown (drain runs, stop services) runs after it.
    graceful_shutdown_seconds: float = Field(default=30.0, ge=0)
    #: Seconds a connection may take to send a complete request head, when it opens and
    #: after each response; past it the connection is closed (slowloris, idle sockets).
    http_header_timeout_seconds: float = Field(default=10.0, gt=0)
    #: Seconds an idle keep-alive connection stays open after a response (uvicorn's). Longer
    #: than HTTP clients keep an idle connection in their pools (httpx, and so
    #: ``langgraph_sdk``: 5 s; aiohttp: 15 s), so that the client ends it: a server closing
    #: at the client's own moment resets the request the client has just sent on it.
    http_keepalive_seconds: float = Field(default=20.0, gt=0)
    #: Resident memory (MiB) past which a watchdog names the extension hook running at the
    #: time (``extensions/boundary/memwatch.py``); it only names, never frees. Unset: off.
    memory_watch_mib: float | None = Field(default=None, gt=0)
    #: Browser origins allowed to call the API (comma-separated; ``*`` for any, ``loopback``
    #: for localhost on any port). Unset: ``gateway.cors_origins`` in config.yaml, else loopback.
    cors_origins: str | None = None
    #: Host names the Gateway answers to (comma-separated; ``*`` for any). Unset:
    #: ``gateway.allowed_hosts`` in config.yaml, else loopback names and ``DEERFLOW_HOST``.
    allowed_hosts: str | None = None
    #: A bearer token every route but ``/health`` and ``/ok`` requires (``Authorization:
    #: Bearer ...`` or ``X-Api-Key``). Unset: ``gateway.api_token``, else no token.
    api_token: SecretStr | None = None
    #: Redis for run streams shared by every Gateway process (``redis://127.0.0.1:6379/0``).
    #: Unset: streams live in the memory of the process running the run.
    redis_url: str | None = None
    #: Prefix of every Redis key the Gateway writes (several deployments can share a Redis).
    redis_prefix: str = "deerflow:"
    #: Redis connections a process opens for run streams' writes and reads (a command waits
    #: for one when all are busy), plus one for every reader's wait for new entries. Not per
    #: stream: 16 carried 128 concurrent streams (docs/SCALE-OUT.md).
    redis_max_connections: int = Field(default=16, ge=1)
    #: Events kept per run for replay (``Last-Event-ID``), and how long after its end.
    stream_retain_events: int = Field(default=10_000, ge=1)
    stream_retain_seconds: float = Field(default=600.0, gt=0)
    #: MiB of events kept per run, and over all runs of this process (in-memory bridge): the
    #: oldest are dropped first (a reader asking for them is told ``not_retained``).
    stream_retain_mib: float = Field(default=16.0, gt=0)
    stream_retain_total_mib: float = Field(default=256.0, gt=0)
    #: Seconds of silence after which an SSE response sends a ``: heartbeat`` comment.
    sse_heartbeat_seconds: float = Field(default=15.0, gt=0)

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        # Validated here so a typo fails at startup with the variable's name, not later
        # inside logging.basicConfig with a bare "Unknown level".
        level = value.strip().upper()
        if not isinstance(logging.getLevelName(level), int):
            raise ValueError(f"unknown log level {value!r}; use DEBUG, INFO, WARNING, ERROR or CRITICAL")
        return level

    @field_validator("api_token")
    @classmethod
    def _token_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            long_enough_token(value.get_secret_value())
        return value

    @field_validator("database_url")
    @classmethod
    def _looks_like_url(cls, value: str) -> str:
        _split(value)
        return value

    @property
    def async_database_url(self) -> str:
        return async_database_url(self.database_url)

    @property
    def sync_database_url(self) -> str:
        return sync_database_url(self.database_url)


_SECRETS = frozenset({"api_token"})  # never echoed back in an error message


class SettingsError(ValueError):
    """A ``DEERFLOW_*`` value (or the option standing for it) cannot be used.

    The message is one line naming the variable, what it holds and why it is refused, e.g.
    ``DEERFLOW_PORT='abc': Input should be a valid integer`` — the operator's next step is to
    fix that variable, under whichever command found it.
    """


def load_settings(**overrides: Any) -> Settings:
    """``Settings(**overrides)`` with a bad value reported as one :class:`SettingsError` line.

    ``overrides`` are command-line options (``--port``, ...): a refused one is named as the
    option the operator typed (``--port=99999``), a refused variable as the variable.
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            name = str(error.get("loc", ("?",))[0])
            variable = f"--{name.replace('_', '-')}" if name in overrides else f"DEERFLOW_{name.upper()}"
            shown = "<hidden>" if name in _SECRETS else error.get("input")
            problems.append(f"{variable}={shown!r}: {error.get('msg', 'invalid')}")
        raise SettingsError("; ".join(problems)) from None
