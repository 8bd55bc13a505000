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
through untouched, including every extension's routes. The Gateway's front layer
(``front.py``) applies it.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import Scope

__all__ = ["JSON_API_PREFIXES", "json_relabelled"]

JSON_API_PREFIXES = ("/api/threads", "/api/assistants")
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_RELABELLED = ("", "text/plain")


def json_relabelled(scope: Scope, headers: Mapping[str, str]) -> Scope:
    """``scope`` with its body labelled ``application/json`` where the rules above say so,
    else ``scope`` itself. ``headers``: the request's, by lower-case name (latin-1 text;
    ``content-type`` the first sent)."""
    if (
        scope["type"] != "http"
        or scope["method"] not in _WITH_BODY
        or "origin" in headers
        or not scope["path"].startswith(JSON_API_PREFIXES)
    ):
        return scope
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type not in _RELABELLED:
        return scope
    kept = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
    return {**scope, "headers": [*kept, (b"content-type", b"application/json")]}
