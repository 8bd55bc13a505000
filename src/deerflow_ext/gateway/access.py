"""Who may talk to the Gateway at all: the Host it was addressed as, the page that sent the
request, and (optionally) a bearer token.

Checked by the Gateway's front layer (``front.py``) in front of every route — the host's and
every extension's — so no route can forget a check and no contributed router can opt out:

* **Host allow-list.** A page on ``attacker.example`` whose DNS name is re-pointed at
  127.0.0.1 (DNS rebinding) reaches a loopback Gateway from the victim's browser with
  ``Host: attacker.example``. Only the names in ``DEERFLOW_ALLOWED_HOSTS`` /
  ``gateway.allowed_hosts`` are answered (default: loopback names and ``DEERFLOW_HOST``);
  anything else gets 421. Liveness (``/health``, ``/ok``) answers any Host: orchestrators
  probe a container by its address.
* **Cross-site requests.** A browser sends "simple" cross-site POSTs (forms, ``text/plain``
  fetches) without asking CORS first; they would start runs or delete threads even though
  the page cannot read the answer. A state-changing request whose ``Origin`` is neither the
  Gateway's own nor an allowed CORS origin (``cors.py``: the same list, so what CORS lets a
  page call, this lets through) is refused with 403, as is one a browser marks
  ``Sec-Fetch-Site: cross-site`` without an Origin. Clients that are not browsers send no
  Origin and are unaffected.
* **Bearer token.** With ``DEERFLOW_API_TOKEN`` (or ``gateway.api_token``) set, every request
  needs it as ``Authorization: Bearer <token>`` or ``X-Api-Key: <token>`` (what
  ``langgraph_sdk``'s ``api_key`` sends), except liveness (``/health``, ``/ok``) and the
  documentation (``/docs``, its assets and ``/openapi.json``, which describe routes, not
  data; the schema then declares the token, so Swagger UI's "Authorize" sends it with every
  call made from the page). ``/metrics`` needs it too: scrapers send it (Prometheus
  ``authorization``), and the metrics name every loaded extension.

CORS comes first (``cors.py``): a preflight is answered before this runs, and these
refusals carry the CORS headers a page needs to show them.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from .cors import LOOPBACK, LOOPBACK_ORIGIN_REGEX

__all__ = [
    "LIVENESS_PATHS",
    "LOOPBACK_HOSTS",
    "OPEN_PATHS",
    "OPEN_PREFIXES",
    "REPEATED_HOST",
    "AccessPolicy",
    "Refusal",
    "allowed_hosts",
    "declare_token",
    "presented_token",
    "refusal",
]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
LIVENESS_PATHS = frozenset({"/health", "/ok", "/api/ok"})
OPEN_PATHS = LIVENESS_PATHS | {"/docs", "/docs/oauth2-redirect", "/openapi.json"}  # no token needed
OPEN_PREFIXES = ("/static-offline-docs/",)
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})
_LOOPBACK_ORIGIN = re.compile(LOOPBACK_ORIGIN_REGEX)

REPEATED_HOST = "host (repeated)"
"""The key the front layer's header map holds when ``Host`` came more than once (no header
name has a space, so it cannot collide with one)."""


def _host_name(value: str) -> str:
    """``Example.COM:8001`` -> ``example.com``; ``[::1]:8001`` and ``::1`` -> ``[::1]``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    if value.count(":") > 1:  # a bare IPv6 address
        return f"[{value}]"
    return value.split(":", 1)[0].rstrip(".")  # "localhost." is localhost


def allowed_hosts(env_value: str | None, configured: Iterable[str] | None, bind_host: str) -> tuple[str, ...]:
    """The host names in force: the environment's list, else the config's, else loopback
    names plus the address the Gateway binds to (unless that is a wildcard)."""
    if env_value is not None and env_value.strip():
        names: Iterable[str] = env_value.split(",")
    elif configured is not None:
        names = configured
    else:
        bound = () if bind_host.strip() in _WILDCARD_BINDS else (bind_host,)
        names = (*LOOPBACK_HOSTS, *bound)
    return tuple(dict.fromkeys(n.strip() if n.strip() == "*" else _host_name(n) for n in names if n.strip()))


@dataclass(frozen=True)
class AccessPolicy:
    """``hosts``: allowed Host names (``*`` any); ``origins``: the CORS origins in force
    (``cors.cors_origins``); ``token``: the bearer token, None when none is required."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]
    token: str | None = None

    def host_allowed(self, host: str | None) -> bool:
        return "*" in self.hosts or (host is not None and _host_name(host) in self.hosts)

    def origin_allowed(self, origin: str, host: str | None) -> bool:
        # An origin is scheme, host and port: the first two are case-insensitive (RFC 3986
        # 3.1, 3.2.2); browsers send them in lower case, the allowed list is kept so.
        origin = origin.rstrip("/").lower()
        if "*" in self.origins or origin in self.origins:
            return True
        if LOOPBACK in self.origins and _LOOPBACK_ORIGIN.fullmatch(origin):
            return True
        # Same origin (the docs page posting to its own Gateway) is never cross-site.
        return host is not None and urlsplit(origin).netloc.lower() == host.strip().lower()

    def token_matches(self, presented: str | None) -> bool:
        if self.token is None:
            return True
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())


def presented_token(headers: Mapping[str, str]) -> str | None:
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return headers.get("x-api-key")


@dataclass(frozen=True)
class Refusal:
    """Why a request is not served: its status, the ``detail`` and any header to add."""

    status: int
    detail: str
    headers: Mapping[str, str] = field(default_factory=dict)

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A JSON error over HTTP; a websocket is closed with 1008 (policy violation)."""
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        response = JSONResponse({"detail": self.detail}, status_code=self.status, headers=dict(self.headers))
        await response(scope, receive, send)


def refusal(policy: AccessPolicy, scope: Scope, headers: Mapping[str, str]) -> Refusal | None:
    """Why ``policy`` refuses this request (an http or websocket scope), or None.

    ``headers``: the request's headers by lower-case name, decoded as latin-1 (for a name
    sent twice, the last); only host, origin, sec-fetch-site, authorization and x-api-key
    are read.
    """
    if REPEATED_HOST in headers:
        return Refusal(400, "the request has more than one Host header (RFC 9112 3.2); send exactly one")
    host = headers.get("host")
    path: str = scope["path"]
    if path in LIVENESS_PATHS and scope.get("method") in _SAFE_METHODS:  # a websocket has no method
        return None
    if not policy.host_allowed(host):
        return Refusal(
            421,
            f"this Gateway does not answer to Host {host!r}; add the name to DEERFLOW_ALLOWED_HOSTS "
            "(or gateway.allowed_hosts in config.yaml)",
        )
    if scope.get("method", "GET") not in _SAFE_METHODS:
        origin = headers.get("origin")
        if origin is not None and not policy.origin_allowed(origin, host):
            return Refusal(
                403,
                f"cross-site request from origin {origin!r} refused; allow the origin in DEERFLOW_CORS_ORIGINS "
                "(or gateway.cors_origins in config.yaml)",
            )
        if origin is None and headers.get("sec-fetch-site") == "cross-site":
            return Refusal(403, "cross-site request refused (the browser marked it Sec-Fetch-Site: cross-site)")
    if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
        return None
    if not policy.token_matches(presented_token(headers)):
        return Refusal(
            401,
            "this Gateway requires its API token: send 'Authorization: Bearer <token>' or 'X-Api-Key: <token>'",
            {"www-authenticate": "Bearer"},
        )
    return None


_SECURITY_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "DEERFLOW_API_TOKEN"},
    "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key", "description": "DEERFLOW_API_TOKEN"},
}
_USER_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "the credential config.yaml's auth.path accepts (Authorization: Bearer ...)",
    },
}


def declare_token(app: FastAPI, *, users: bool = False) -> None:
    """Make the OpenAPI document say every operation takes the token (either header), or
    (``users``: ``auth`` configured) a bearer credential, so Swagger UI's "Authorize" sends
    it with every call made from ``/docs``."""
    build = app.openapi
    schemes = _USER_SCHEMES if users else _SECURITY_SCHEMES

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = schemes
            schema["security"] = [{name: []} for name in schemes]
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]
