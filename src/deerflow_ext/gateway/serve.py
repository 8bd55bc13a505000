"""``deerflow-ext serve``: run the Gateway under uvicorn.

Everything that can refuse a start is checked before uvicorn runs, in the order of
:mod:`deerflow_ext.preflight` — variables, config file, models, database, Redis, port — and then the
extensions are loaded (``create_app``). Each refusal is one ``error: ...`` line and exit code
1 (:mod:`deerflow_ext.exitcodes`), never a traceback (that is ``DEERFLOW_LOG_LEVEL=DEBUG``'s).
The listening socket is bound here and handed to uvicorn, so a port in use is found before
migrations run, and the startup line can say where the Gateway really listens (``--port 0``).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ..adapters.uvicorn_private import HeadDeadlineProtocol, run_workers, set_head_deadline
from ..exitcodes import EXIT_INTERRUPTED, EXIT_OK, EXIT_STARTUP

__all__ = ["add_serve_arguments", "build_app_from_env", "serve_command", "startup_line", "uvicorn_options"]

logger = logging.getLogger("deerflow_ext.gateway")


def _serve_options() -> Any:
    from .app import GatewayOptions

    # Only a served process may end itself at the shutdown bound (exit_bound.py), and only
    # it lives long enough on one app for freezing its startup heap to pay (app.py).
    return GatewayOptions(exit_bound=True, freeze_startup_heap=True)


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


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {name: value for name in ("config", "host", "port") if (value := getattr(args, name, None)) is not None}


def uvicorn_options(settings: Any) -> dict[str, Any]:
    """The uvicorn settings ``serve`` uses, whatever the number of workers.

    ``timeout_graceful_shutdown`` is always set: uvicorn's default waits for every open
    request forever, so a single hanging request (an extension route that never returns)
    would block shutdown — and with it the run drain and service stops behind it. The
    protocol class adds a deadline for each request head (``adapters.uvicorn_private``),
    which uvicorn lacks: without it an idle or slowloris connection is held for ever.
    """
    set_head_deadline(settings.http_header_timeout_seconds)
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "reload": False,
        "log_level": settings.log_level.lower(),
        "timeout_graceful_shutdown": settings.graceful_shutdown_seconds,
        "timeout_keep_alive": settings.http_keepalive_seconds,
    }
    if HeadDeadlineProtocol is not None:
        options["http"] = HeadDeadlineProtocol
    return options


def build_app_from_env() -> Any:
    """uvicorn factory for ``--workers N``: each worker process builds its own app."""
    from ..config.settings import load_settings
    from ..extensions.operator_view.hook_metrics import set_metrics_enabled
    from . import create_app

    settings = load_settings()
    set_metrics_enabled(settings.metrics)
    set_head_deadline(settings.http_header_timeout_seconds)  # this worker's protocol instances
    return create_app(settings, options=_serve_options())


def startup_line(settings: Any, config: Any, extensions: Any, address: str) -> str:
    """What is running: version, config file, database (password hidden), models, extensions, address."""
    from .. import __version__
    from ..agents.models import describe_models
    from ..preflight import redacted_url

    path = settings.config
    config_text = str(path.resolve()) if path.exists() else f"{path} (not found: built-in defaults)"
    loaded = ", ".join(extensions.loaded)
    return (
        f"deerflow-ext {__version__} starting: config {config_text}; "
        f"database {redacted_url(settings.database_url)}; models {describe_models(config)}; "
        f"extensions {extensions.counts} ({loaded or 'none'}); listening on {address}"
    )


def _address(settings: Any, sock: socket.socket | None) -> str:
    host, port = settings.host, settings.port
    if sock is not None:
        host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in str(host) else f"http://{host}:{port}"


def serve_command(args: argparse.Namespace | Sequence[str] | None = None) -> int:
    """Run the Gateway until interrupted; returns the process exit code."""
    if args is None or not isinstance(args, argparse.Namespace):
        args = add_serve_arguments(argparse.ArgumentParser(prog="deerflow-ext serve")).parse_args(args)
    from ..config.settings import SettingsError, load_settings
    from ..extensions.operator_view.hook_metrics import set_metrics_enabled
    from ..logs import configure_logging
    from ..preflight import bind_listener, check_database, check_redis, error_line, load_startup_config, refusals

    try:
        settings = load_settings(**_overrides(args))
    except SettingsError as exc:
        print(error_line(exc), file=sys.stderr)
        return EXIT_STARTUP
    log_config = configure_logging(settings.log_level, settings.log_format)
    set_metrics_enabled(settings.metrics)
    workers = max(1, int(getattr(args, "workers", 1) or 1))

    from . import create_app

    sock: socket.socket | None = None
    try:
        if workers > 1 and settings.async_database_url.startswith("sqlite"):
            from ..preflight import StartupError

            raise StartupError("--workers > 1 needs PostgreSQL; set DEERFLOW_DATABASE_URL")
        config = load_startup_config(settings, config_path=getattr(args, "config", None))
        check_database(settings.database_url)
        check_redis(settings.redis_url)
        sock = bind_listener(settings.host, settings.port)
        app = create_app(settings, config=config, options=_serve_options())
    except refusals() as exc:
        if sock is not None:
            sock.close()
        print(error_line(exc), file=sys.stderr)
        return EXIT_STARTUP
    logger.info("%s", startup_line(settings, config, app.state.extensions, _address(settings, sock)))

    import uvicorn

    if workers > 1:
        # Workers import the app themselves (the settings travel through the environment) and
        # serve on the socket bound above, the address the startup line names (`--port 0`
        # included). uvicorn's supervisor swallows the SIGINT that stops it: run_workers
        # tells it, for the exit code.
        os.environ["DEERFLOW_CONFIG"] = str(settings.config)
        os.environ["DEERFLOW_DATABASE_URL"] = settings.database_url
        supervised = uvicorn.Config(
            "deerflow_ext.gateway.serve:build_app_from_env",
            factory=True,
            workers=workers,
            log_config=log_config,
            **uvicorn_options(settings),
        )
        try:
            interrupted = run_workers(supervised, sock)
        finally:
            sock.close()
        return EXIT_INTERRUPTED if interrupted else EXIT_OK
    server = uvicorn.Server(uvicorn.Config(app, log_config=log_config, **uvicorn_options(settings)))
    try:
        with _CtrlC() as ctrl_c:
            server.run(sockets=[sock])
    finally:
        sock.close()
    if ctrl_c.seen:
        return EXIT_INTERRUPTED
    # uvicorn reports a failed lifespan startup itself (one line below DEBUG: see logs.py).
    return EXIT_OK if server.started else EXIT_STARTUP


class _CtrlC:
    """Whether the Gateway stopped for a SIGINT: ``serve`` then exits 130, as the table says.

    uvicorn takes SIGINT over while it serves, shuts down in order, then restores the
    handler it found and raises the signal again for it. That handler is this one, so the
    re-raised Ctrl-C is recorded rather than becoming a ``KeyboardInterrupt`` traceback (a
    terminal) or nothing at all (a background job, which starts with SIGINT ignored and so
    exited 0).
    """

    def __init__(self) -> None:
        self.seen = False
        self._previous: Any = None

    def _record(self, signum: int, frame: Any) -> None:
        self.seen = True

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
