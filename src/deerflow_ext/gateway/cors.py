"""CORS for browser clients served from another origin (a chat UI on its own dev server).

Allowed origins come from ``DEERFLOW_CORS_ORIGINS`` (comma-separated) or ``gateway.cors_origins``
in ``config.yaml``, the environment winning. Unset, loopback origins on any port are allowed
(``http://localhost:3000``, ``http://127.0.0.1:5173``, ``http://[::1]:8080``), which is what
local development needs and nothing a remote page can claim. ``loopback`` in the list keeps
them beside explicit origins; ``*`` allows every origin.

Credentials (cookies) are not allowed: the Gateway authenticates with a bearer token in a
header, which CORS lets through as an allowed request header. CORS is the first thing the
Gateway's front layer (``front.py``) does, so a preflight is answered before authentication
or a Host check runs (browsers send preflights without credentials) and error responses of
the checks after it still carry the CORS headers a browser needs to show them. The SDKs
read ``Content-Location`` (the run id) and ``Location`` (where to resume a stream): both
are exposed.

Only a request with an ``Origin`` goes through Starlette's ``CORSMiddleware``; for any other
the middleware's one effect is ``Vary: Origin`` on the response (:func:`vary_origin`), which
the front layer adds itself — so the SDKs, curl and proxies, which send no ``Origin``, do not
pay a middleware and a ``send`` wrapper per message for a header.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message

__all__ = ["EXPOSED_HEADERS", "LOOPBACK", "LOOPBACK_ORIGIN_REGEX", "cors_layer", "cors_origins", "vary_origin"]

LOOPBACK = "loopback"
LOOPBACK_ORIGIN_REGEX = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"
EXPOSED_HEADERS = ("Content-Location", "Location", "X-Pagination-Total", "X-Pagination-Next")


def cors_origins(env_value: str | None, configured: Iterable[str] | None) -> tuple[str, ...]:
    """The origins in force: the environment's list, else the config's, else loopback."""
    if env_value is not None and env_value.strip():
        return tuple(_origin(o) for o in env_value.split(",") if o.strip())
    if configured is not None:
        return tuple(_origin(o) for o in configured if o.strip())
    return (LOOPBACK,)


def _origin(value: str) -> str:
    """An allowed origin as browsers send one: no trailing slash, scheme and host (and so
    the whole origin) in lower case."""
    return value.strip().rstrip("/").lower()


def cors_layer(app: ASGIApp, origins: Iterable[str]) -> CORSMiddleware:
    """Starlette's CORS in front of ``app``, for the ``origins`` in force."""
    origins = tuple(origins)
    explicit = [o for o in origins if o != LOOPBACK]
    return CORSMiddleware(
        app,
        allow_origins=explicit,
        allow_origin_regex=LOOPBACK_ORIGIN_REGEX if LOOPBACK in origins else None,
        allow_methods=["*"],
        allow_headers=["*"],
        expose_headers=list(EXPOSED_HEADERS),
        allow_credentials=False,
        max_age=600,
    )


_VARY = b"vary"


def vary_origin(message: Message) -> None:
    """Add ``Origin`` to a response start's ``Vary``, as ``CORSMiddleware`` does for a request
    without ``Origin``: one ``vary`` header, the existing values joined before ``Origin``, in
    the place of the first one (or last when there was none).

    Why it is there at all: a cache in front of the Gateway must not serve an answer given
    to a request without ``Origin`` (no CORS headers) to a page that sends one.
    """
    headers: list[tuple[bytes, bytes]] = list(message.get("headers", ()))  # a copy, as Starlette's
    message["headers"] = headers
    found = [i for i, (name, _) in enumerate(headers) if name == _VARY]
    if not found:
        headers.append((_VARY, b"Origin"))
        return
    values = [headers[i][1] for i in found]
    for i in reversed(found[1:]):
        del headers[i]
    headers[found[0]] = (_VARY, b", ".join([*values, b"Origin"]))
