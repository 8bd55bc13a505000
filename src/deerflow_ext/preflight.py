"""Startup checks: everything that can refuse a start is found first, and said in one line.

``serve``, ``run`` and ``extensions doctor`` share these steps, in this order, so the same
deployment fails the same way under each (exit codes in :mod:`deerflow_ext.exitcodes`):

1. ``DEERFLOW_*`` variables (:func:`~deerflow_ext.config.settings.load_settings`);
2. the config file: a path given explicitly (``--config`` or ``DEERFLOW_CONFIG``) must exist —
   silently running on defaults because of a typo is worse than refusing;
3. ``config.yaml`` itself, then its ``models:`` (imported and constructed, never called);
4. the database: a supported URL, a writable SQLite directory, a PostgreSQL that answers;
   and ``DEERFLOW_REDIS_URL``, when set, a Redis that answers;
5. the listening socket, bound *before* migrations, so a port clash is not discovered after
   the log has said "startup complete".

Each failure raises an exception whose ``str()`` is the one line to print; :func:`error_line`
turns any of them into ``error: ...``. Tracebacks are left to ``DEERFLOW_LOG_LEVEL=DEBUG``.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from .config.loading import ConfigError, load_app_config
from .config.settings import Settings, SettingsError

if TYPE_CHECKING:
    from .config.schema import AppConfig

__all__ = [
    "StartupError",
    "bind_listener",
    "check_database",
    "check_redis",
    "error_line",
    "load_startup_config",
    "redacted_url",
    "refusals",
]


class StartupError(RuntimeError):
    """The environment refuses the start (database, port); the message is the one line."""


def refusals() -> tuple[type[BaseException], ...]:
    """Every exception type that means "this deployment does not start", for ``except``."""
    from .extensions.plugin_loading.loader import ExtensionLoadError
    from .extensions.plugin_loading.tables import TablePrefixCollisionError

    return (ConfigError, SettingsError, StartupError, ExtensionLoadError, TablePrefixCollisionError)


def error_line(exc: BaseException) -> str:
    """``error: <the exception's own line>``; a multi-problem ConfigError gives one line each."""
    problems = getattr(exc, "problems", None) or (str(exc),)
    return "\n".join(f"error: {problem}" for problem in problems)


def load_startup_config(settings: Settings, *, config_path: str | os.PathLike[str] | None = None) -> AppConfig:
    """Steps 2 and 3: the file named explicitly must exist; the config and its models must be usable."""
    from .agents.models import ensure_models

    path = Path(config_path) if config_path is not None else settings.config
    explicit = config_path is not None or "config" in settings.model_fields_set
    if explicit and not path.exists():
        how = "--config" if config_path is not None else "DEERFLOW_CONFIG"
        raise ConfigError(path, None, None, f"does not exist (named by {how}); create it or fix the path")
    config = load_app_config(path)
    ensure_models(config, path)
    return config


def redacted_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for log lines and errors)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url


def check_database(url: str, *, timeout: float = 5.0) -> None:
    """Step 4. Raises :class:`StartupError` naming the URL (password hidden) or the path."""
    from .persistence.engine import normalize_database_url, sqlite_path

    shown = redacted_url(url)
    try:
        parsed = normalize_database_url(url)
    except Exception as exc:
        raise StartupError(f"DEERFLOW_DATABASE_URL: {' '.join(str(exc).split())}") from None
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_path(parsed)
        if path is None:
            raise StartupError(
                f"DEERFLOW_DATABASE_URL={shown!r}: an in-memory SQLite database cannot be shared; use a file"
            )
        _check_writable_sqlite(path)
        return
    _check_postgres(url, shown, timeout)


def _check_writable_sqlite(path: Path) -> None:
    directory = path.parent.resolve()
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise StartupError(f"database directory {directory} cannot be created: {existing} is not a directory")
    target = directory if directory.exists() else existing
    if not os.access(target, os.W_OK | os.X_OK):
        raise StartupError(f"database directory {target} is not writable (SQLite writes {path.name} there)")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise StartupError(f"database file {path} is not writable")


def _check_postgres(url: str, shown: str, timeout: float) -> None:
    import psycopg

    from .persistence import psycopg_conninfo

    try:
        with psycopg.connect(psycopg_conninfo(url), connect_timeout=max(1, int(timeout))) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise StartupError(f"database {shown} is unreachable: {reason}") from None


def check_redis(url: str | None, *, timeout: float = 3.0) -> None:
    """``DEERFLOW_REDIS_URL`` (cross-process run streams), when set, must answer a PING."""
    if not url:
        return
    import redis

    shown = redacted_url(url)
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, ValueError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise StartupError(f"DEERFLOW_REDIS_URL: cannot reach Redis at {shown} ({reason})") from None


def bind_listener(host: str, port: int) -> socket.socket:
    """Step 5: the listening socket, bound now (uvicorn serves on it). Raises StartupError."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"DEERFLOW_HOST={host!r}: cannot resolve it ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(
                f"port {port} on {host} is already in use (another Gateway?); set --port or DEERFLOW_PORT"
            ) from None
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock
