"""Server-sent events framing for a run's stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi.responses import StreamingResponse

from ..runtime.stream import RunStream

__all__ = ["encode_event", "jsonable", "sse_response"]


def jsonable(value: Any) -> Any:
    """Plain JSON data from stream chunks: LangChain messages are pydantic models and
    ``messages`` chunks are ``(message, metadata)`` tuples; anything else unknown is a string."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return jsonable(dump())
        except Exception:
            return str(value)
    return str(value)


def encode_event(event: str, data: Any) -> bytes:
    """``event: <name>\\ndata: <json>\\n\\n`` (JSON never contains a raw newline)."""
    payload = json.dumps(jsonable(data), default=str, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {payload}\n\n".encode()


async def _frames(stream: RunStream) -> AsyncIterator[bytes]:
    async for item in stream.subscribe():
        yield encode_event(item.event, item.data)


def sse_response(stream: RunStream, headers: dict[str, str] | None = None) -> StreamingResponse:
    # A client that disconnects stops reading; the run goes on and is persisted, because the
    # run belongs to the thread, not to one HTTP connection.
    return StreamingResponse(
        _frames(stream),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})},
    )
