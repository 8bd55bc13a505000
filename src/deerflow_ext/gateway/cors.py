"""CORS for browser clients served from another origin (a chat UI on its own dev server).

Allowed origins come from ``DEERFLOW_CORS_ORIGINS`` (comma-separated) or ``gateway.cors_origins``
in ``config.yaml``, the environment winning. Unset, loopback origins on any port are allowed
(``http://localhost:3000``, ``http://127.0.0.1:5173``, ``http://[::1]:8080``), which is what
local development needs and nothing a remote page can claim. ``loopback`` in the list keeps
them beside explicit origins; ``*`` allows every origin.

Credentials (cookies) are not allowed: the Gateway authenticates with a bearer token in a
header, which CORS lets through as an allowed request header. The middleware is the
outermost layer — add it after every other middleware — so a preflight is answered before
authentication or a Host check runs (browsers send preflights without credentials) and
error responses of those layers still carry the CORS headers a browser needs to show them.
The SDKs read ``Content-Location`` (the run id) and ``Location`` (where to resume a
stream): both are exposed.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

__all__ = ["EXPOSED_HEADERS", "LOOPBACK", "LOOPBACK_ORIGIN_REGEX", "cors_origins", "install_cors"]

LOOPBACK = "loopback"
LOOPBACK_ORIGIN_REGEX = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"
EXPOSED_HEADERS = ("Content-Location", "Location", "X-Pagination-Total", "X-Pagination-Next")


def cors_origins(env_value: str | None, configured: Iterable[str] | None) -> tuple[str, ...]:
    """The origins in force: the environment's list, else the config's, else loopback."""
    if env_value is not None and env_value.strip():
        return tuple(o.strip().rstrip("/") for o in env_value.split(",") if o.strip())
    if configured is not None:
        return tuple(o.strip().rstrip("/") for o in configured if o.strip())
    return (LOOPBACK,)


def install_cors(app: FastAPI, origins: Iterable[str]) -> None:
    origins = tuple(origins)
    explicit = [o for o in origins if o != LOOPBACK]
    app.add_middleware(
        CORSMiddleware,
        allow_origins=explicit,
        allow_origin_regex=LOOPBACK_ORIGIN_REGEX if LOOPBACK in origins else None,
        allow_methods=["*"],
        allow_headers=["*"],
        expose_headers=list(EXPOSED_HEADERS),
        allow_credentials=False,
        max_age=600,
    )
