"""A plain MCP ``tools/call``, answered without the SDK's per-request session.

The ``mcp`` SDK's stateless transport builds, for every POST, a transport, a server session
and three task groups joined by memory streams, routes the one request through them to its
handler and the one answer back, and tears it all down: about 0.9 ms of CPU on the machine
this was measured on (2026-12-07), an eighth of a whole embedded-model run. Nothing of it is
kept between requests, so for the request that matters — one JSON-RPC ``tools/call`` that
asks for no progress, answered as JSON — the endpoint answers itself: the SDK's own types
read the request and write the answer, as the SDK's session would write it
(``tests/protocols/test_mcp_direct_calls.py`` holds the two answers side by side, byte for
byte, so a change of the SDK's shape fails there).

A request is taken here only when the SDK would answer it the same way, so every other
request — ``initialize``, ``tools/list``, notifications, ``GET``/``DELETE``, a body or header
the SDK would refuse, a call asking for progress or for a task — goes to the SDK, which
alone decides its answer and its errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp.types as mcp_types
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Scope

__all__ = ["PlainCall", "answer", "plain_call", "wants_progress"]

_JSON = "application/json"
_PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})


@dataclass(frozen=True)
class PlainCall:
    """A ``tools/call`` the endpoint answers itself: its JSON-RPC id, tool and arguments."""

    request_id: mcp_types.RequestId
    name: str
    arguments: dict[str, Any] | None


def wants_progress(payload: object) -> bool:
    """Whether the request is a ``tools/call`` naming a progress token (``_meta.progressToken``)."""
    params = payload.get("params") if isinstance(payload, dict) and payload.get("method") == "tools/call" else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get("progressToken") is not None


def _headers_pass(scope: Scope) -> bool:
    """The SDK's checks of a POST in JSON-response mode, each one passed: the client accepts
    JSON, sends JSON (the transport-security check and the transport's own), and names a
    protocol version the SDK speaks (or none)."""
    headers = Headers(scope=scope)
    accepted = (part.strip() for part in headers.get("accept", "").split(","))
    if not any(media.startswith(_JSON) for media in accepted):
        return False
    content_type = headers.get("content-type", "")
    if not content_type.lower().startswith(_JSON):
        return False
    if not any(part.strip() == _JSON for part in content_type.split(";")[0].split(",")):
        return False
    version = headers.get("mcp-protocol-version")
    return version is None or version in SUPPORTED_PROTOCOL_VERSIONS


def plain_call(scope: Scope, body: bytes) -> PlainCall | None:
    """The call to answer here, or ``None`` for a request the SDK answers."""
    if not _headers_pass(scope):
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("method") != "tools/call" or wants_progress(payload):
        return None
    params = payload.get("params")
    if not isinstance(params, Mapping) or not _PLAIN_PARAMS.issuperset(params):
        return None  # a task-augmented call, or a field this module does not know
    try:
        request = mcp_types.JSONRPCRequest.model_validate(payload)
        call = mcp_types.CallToolRequest.model_validate({"method": request.method, "params": request.params})
    except ValidationError:
        return None
    return PlainCall(request_id=request.id, name=call.params.name, arguments=call.params.arguments)


def answer(call: PlainCall, result: mcp_types.CallToolResult) -> Response:
    """The HTTP answer the SDK's session and transport write for ``result``."""
    message = mcp_types.JSONRPCResponse(
        jsonrpc="2.0",
        id=call.request_id,
        result=mcp_types.ServerResult(result).model_dump(by_alias=True, mode="json", exclude_none=True),
    )
    return Response(
        message.model_dump_json(by_alias=True, exclude_none=True),
        status_code=200,
        headers={"Content-Type": _JSON},
    )
