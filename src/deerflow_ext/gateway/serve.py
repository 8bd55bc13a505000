"""``deerflow-ext serve``: run the Gateway under uvicorn.

A configuration problem is an operator's problem, not a bug: it is printed as one
``error: ...`` line and the command exits 2, without a traceback. The app is built before
uvicorn starts so that such errors surface here, synchronously, rather than inside
uvicorn's startup logging.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["add_serve_arguments", "build_app_from_env", "serve_command", "uvicorn_options"]

CONFIG_ERROR_EXIT = 2


def _serve_options() -> Any:
    from .app import GatewayOptions

    # Only a served process may end itself at the shutdown bound (exit_bound.py).
    return GatewayOptions(exit_bound=True)



def add_serve_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--config", help="path of config.yaml (default: $DEERFLOW_CONFIG or ./config.yaml)")
    parser.add_argument("--host", help="bind address (default: $DEERFLOW_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: $DEERFLOW_PORT or 8001)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes; more than one needs PostgreSQL (DEERFLOW_DATABASE_URL)",
    )
    return parser


def _settings(args: argparse.Namespace) -> Any:
    from ..config.settings import Settings

    overrides: dict[str, Any] = {}
    for name in ("config", "host", "port"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)


def uvicorn_options(settings: Any) -> dict[str, Any]:
    """The uvicorn settings ``serve`` uses, whatever the number of workers.

    ``timeout_graceful_shutdown`` is always set: uvicorn's default waits for every open
    request forever, so a single hanging request (an extension route that never returns)
    would block shutdown — and with it the run drain and service stops behind it.
    """
    return {
        "host": settings.host,
        "port": settings.port,
        "reload": False,
        "log_level": settings.log_level.lower(),
        "timeout_graceful_shutdown": settings.graceful_shutdown_seconds,
    }


def build_app_from_env() -> Any:
    """uvicorn factory for ``--workers N``: each worker process builds its own app."""
    from . import create_app

    return create_app(options=_serve_options())


def _check_redis(url: str | None) -> None:
    """Before uvicorn starts: an unreachable ``DEERFLOW_REDIS_URL`` is one ``error:`` line."""
    if not url:
        return
    import redis

    from ..runtime.redis_stream import RedisUnavailableError

    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        raise RedisUnavailableError(f"DEERFLOW_REDIS_URL: cannot reach Redis at {url} ({exc})") from exc


def serve_command(args: argparse.Namespace | Sequence[str] | None = None) -> int:
    """Run the Gateway until interrupted; returns the process exit code."""
    if args is None or not isinstance(args, argparse.Namespace):
        args = add_serve_arguments(argparse.ArgumentParser(prog="deerflow-ext serve")).parse_args(args)
    from pydantic import ValidationError

    from ..config.loading import ConfigError
    from ..extensions.loader import ExtensionLoadError
    from ..extensions.tables import TablePrefixCollisionError
    from ..runtime.redis_stream import RedisUnavailableError

    try:
        settings = _settings(args)
    except ValidationError as exc:
        print(f"error: invalid DEERFLOW_* setting: {exc.errors()[0].get('msg')}", file=sys.stderr)
        return CONFIG_ERROR_EXIT
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    workers = max(1, int(getattr(args, "workers", 1) or 1))
    if workers > 1 and settings.async_database_url.startswith("sqlite"):
        print("error: --workers > 1 needs PostgreSQL; set DEERFLOW_DATABASE_URL", file=sys.stderr)
        return CONFIG_ERROR_EXIT

    from . import create_app

    try:
        app = create_app(settings, options=_serve_options())
        _check_redis(settings.redis_url)
    except (ConfigError, ExtensionLoadError, TablePrefixCollisionError, RedisUnavailableError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return CONFIG_ERROR_EXIT

    import uvicorn

    if workers > 1:
        # Workers import the app themselves; the settings travel through the environment.
        os.environ["DEERFLOW_CONFIG"] = str(settings.config)
        os.environ["DEERFLOW_DATABASE_URL"] = settings.database_url
        uvicorn.run(
            "deerflow_ext.gateway.serve:build_app_from_env",
            factory=True,
            workers=workers,
            **uvicorn_options(settings),
        )
        return 0
    uvicorn.run(app, **uvicorn_options(settings))
    return 0
