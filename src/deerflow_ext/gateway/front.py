"""The Gateway's one ASGI layer in front of every route, the host's and every extension's.

It does in one pass over the request's head, with one ``send`` wrapper, what five
middlewares did one after another, each its own call and scope checks, three of them a
wrapper on every message of the response (an SSE stream sends one per batch of events).
In their order, the first outermost, so every answer of a later step (a refusal, a 413,
a 500) still carries the CORS headers:

1. CORS (``cors.py``): a request with an ``Origin`` goes through Starlette's CORS, which
   answers a preflight itself; any other gets the ``Vary: Origin`` that CORS adds.
2. Unexpected errors (``errors.py``): a failure no handler took is answered with the JSON
   500 (503 while the database cannot be reached) on the same connection, unless the
   response has started; then it propagates and the server ends the response.
3. Access (``access.py``): the Host allow-list, cross-site refusals, the bearer token; with
   ``auth`` configured, the request's user (``identity``: ``@auth.authenticate``), put in
   the scope as Starlette's authentication middleware puts it (``scope["user"]``,
   ``scope["auth"]``). Without ``auth`` that step is one ``None`` check.
4. Body limits (``limits.py``): a declared length over the limit is refused before any route
   runs; a body is counted and timed as the route reads it; a request that announces no
   body keeps its ``receive`` as it is.
5. JSON bodies (``json_bodies.py``): an Origin-less body to the JSON API is labelled JSON.

Each rule is written once, in its module; this one only calls them, in order. Extension
route failures are attributed further in (``errors.ContributedRouteErrors``), which reads
this layer's record of whether the response started instead of wrapping ``send`` again.
"""

from __future__ import annotations

from starlette.authentication import AuthCredentials
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..identity import REQUEST_USER, IdentityGate
from ..identity.authenticate import AuthenticationRefused
from .access import OPEN_PATHS, OPEN_PREFIXES, REPEATED_HOST, AccessPolicy, Refusal, presented_token, refusal
from .asgi import StartTracking
from .cors import cors_layer, vary_origin
from .errors import internal_error, log_unexpected
from .json_bodies import json_relabelled
from .limits import BodyLimits, BodyTooLarge, BodyTooSlow, announces_body, declared_length

__all__ = ["GatewayFront"]

_READ = frozenset(
    {
        b"host",
        b"origin",
        b"sec-fetch-site",
        b"authorization",
        b"x-api-key",
        b"content-length",
        b"content-type",
        b"transfer-encoding",
    }
)
_FIRST_WINS = frozenset({b"content-length", b"content-type"})


def _read_headers(scope: Scope) -> dict[str, str]:
    """The headers the rules read, by name, as latin-1 text. For a name sent twice:
    the first ``content-length`` and ``content-type`` (what Starlette and FastAPI read) and
    the last of the others (what the access rules always read) — but a second ``Host`` is
    recorded under :data:`~.access.REPEATED_HOST`, which the access rules refuse (RFC 9112
    3.2): which one a proxy routed by is anyone's guess."""
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name in _READ:
            key = name.decode("latin-1")
            if name not in _FIRST_WINS or key not in found:
                if name == b"host" and key in found:
                    found[REPEATED_HOST] = key
                found[key] = value.decode("latin-1")
    return found


class _Response(StartTracking):
    """The front's ``send``: records the start and, where CORS did not run, adds its ``Vary``."""

    def __init__(self, send: Send, vary: bool) -> None:
        super().__init__(send)
        self.vary = vary

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            if self.vary:
                vary_origin(message)
        await self.send(message)


class GatewayFront:
    """CORS, unexpected errors, access, body limits and JSON bodies, in that order."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        policy: AccessPolicy,
        max_body_bytes: int,
        body_seconds: float,
        identity: IdentityGate | None = None,
    ) -> None:
        self.app = app
        self.policy = policy
        self.identity = identity
        self.limits = BodyLimits(max_body_bytes, body_seconds)
        self._cors = cors_layer(self._behind_cors, policy.origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            headers = _read_headers(scope)
            if "origin" in headers:
                await self._cors(scope, receive, send)
            else:
                await self._serve(scope, receive, _Response(send, vary=True), headers)
        elif kind == "websocket":
            headers = _read_headers(scope)
            refused = refusal(self.policy, scope, headers)
            if refused is None and self.identity is not None:
                refused = await self._authenticated(scope, headers)
            if refused is None:
                await self.app(scope, receive, send)
            else:
                await refused.answer(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _authenticated(self, scope: Scope, headers: dict[str, str]) -> Refusal | None:
        """Put the request's user in ``scope``, or say why it has none (documentation and
        liveness need no user, as they need no token)."""
        path: str = scope["path"]
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES) or self.identity is None:
            return None
        found = await self.identity.authenticate(scope, presented_token(headers))
        if isinstance(found, AuthenticationRefused):
            return Refusal(found.status, found.detail, found.headers)
        scope["user"] = found
        scope["auth"] = AuthCredentials(list(found.permissions))
        REQUEST_USER.set(found)  # this request's task only: code handed no request reads it
        return None

    async def _behind_cors(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._serve(scope, receive, _Response(send, vary=False), _read_headers(scope))

    async def _serve(self, scope: Scope, receive: Receive, send: _Response, headers: dict[str, str]) -> None:
        try:
            await self._checked(scope, receive, send, headers)
        except Exception as exc:
            log_unexpected(scope, exc)
            if send.started:
                raise
            await internal_error(exc, database=True)(scope, receive, send)

    async def _checked(self, scope: Scope, receive: Receive, send: _Response, headers: dict[str, str]) -> None:
        refused = refusal(self.policy, scope, headers)
        if refused is None and self.identity is not None:
            refused = await self._authenticated(scope, headers)
        if refused is not None:
            await refused.answer(scope, receive, send)
            return
        limits = self.limits
        length = headers.get("content-length")
        declared = declared_length(length)
        if declared is not None and declared > limits.max_body_bytes:
            await limits.refuse(scope, receive, send)
            return
        inner = json_relabelled(scope, headers)
        if not announces_body(scope.get("http_version", "1.1"), length, headers.get("transfer-encoding")):
            await self.app(inner, receive, send)
            return
        try:
            await self.app(inner, limits.receive(receive), send)
        except (BodyTooLarge, BodyTooSlow) as exc:
            if send.started:
                raise
            await limits.refuse(scope, receive, send, exc)
