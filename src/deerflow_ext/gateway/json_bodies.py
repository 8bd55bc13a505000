"""Request bodies of the LangGraph Platform routes are JSON even when a proxy drops the header.

LangChain's agent-chat-ui goes to production behind ``langgraph-nextjs-api-passthrough``, a
Next.js route that forwards each call to the Gateway server-side, with the body but without
its ``Content-Type``: fetch then labels it ``text/plain``. A LangGraph server parses any
body as JSON; FastAPI parses only a JSON content type, and every call of the passthrough
would fail with a 422 about a body that is not an object.

Reading such a body as JSON is safe only where no browser sent it: a page on another site
can POST ``text/plain`` without a CORS preflight (a "simple" request), so for a browser the
content type is what keeps a cross-site form from starting runs. Browsers put ``Origin`` on
every POST, PUT and PATCH; the passthrough, curl and the Python SDK do not. So a body is
relabelled JSON only when the request has no ``Origin``, its content type is missing or
``text/plain``, and it goes to the API's threads, runs or assistants; anything else passes
through untouched, including every extension's routes.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["JSON_API_PREFIXES", "OriginlessBodiesAreJson"]

JSON_API_PREFIXES = ("/api/threads", "/api/assistants")
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_RELABELLED = (b"", b"text/plain")


class OriginlessBodiesAreJson:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _WITH_BODY and scope["path"].startswith(JSON_API_PREFIXES):
            headers: list[tuple[bytes, bytes]] = scope["headers"]
            names = {name for name, _ in headers}
            content_type = next((value for name, value in headers if name == b"content-type"), b"")
            media_type = content_type.split(b";", 1)[0].strip().lower()
            if b"origin" not in names and media_type in _RELABELLED:
                kept = [(name, value) for name, value in headers if name != b"content-type"]
                scope = {**scope, "headers": [*kept, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)
