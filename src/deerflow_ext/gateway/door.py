"""What a host route accepts besides its schema: text the databases can store, JSON shallow
and small enough to read back, and no more messages than ``gateway.limits`` allows.

A lone UTF-16 surrogate (``"\\ud800"``, legal in a JSON string escape) cannot be encoded as
UTF-8, so SQLite fails to store it and every response containing it fails to render; a NUL
is refused by PostgreSQL; ``NaN``/``Infinity`` (which Python's parser accepts) are not JSON
and PostgreSQL's ``jsonb`` refuses them; JSON nested hundreds deep is stored but exceeds
the serializer's depth when read back, breaking every listing that includes it. Each is
answered 422 here, naming the field (``input.messages.0.content``), before anything is
stored or run.

:func:`door` is a FastAPI dependency on every host router. It runs after FastAPI parsed the
body (``request.json()`` returns the parsed document from the request's cache) and before
the body is validated against its model. Path and query parameters get the same text check:
they reach SQL too.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from typing import Any

from fastapi import HTTPException, Request

from ..config.schema import JSON_DEPTH_CEILING, RequestLimits

__all__ = ["door", "first_problem", "readable", "text_problem"]

logger = logging.getLogger("deerflow_ext.gateway")

_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
# Routes that read their own body, bounded and only once the request is admitted: a plugin
# action is refused (404, 403) before its body is read, and stores nothing (routes/plugins.py).
_OWN_BODY_PREFIXES = ("/api/plugins/",)


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored (a NUL, a lone surrogate), or None."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"contains a lone UTF-16 surrogate (\\u{ord(text[exc.start]):04x}), which is not valid Unicode"
    return None


def _where(path: tuple[str, ...]) -> str:
    shown = path if len(path) <= 8 else (*path[:4], "…", *path[-2:])
    return ".".join(shown) or "body"


_DEPTH_SETTING = " (gateway.limits.max_json_depth in config.yaml)"


def _walk(document: Any, max_depth: int, depth_hint: str = _DEPTH_SETTING) -> Iterator[str]:
    """Problems of one JSON document, depth-first, without recursion (it may be deep)."""
    stack: list[tuple[Any, tuple[str, ...], int]] = [(document, (), 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= max_depth:
                yield f"{_where(path)}: nested deeper than {max_depth} levels{depth_hint}"
                continue
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                key_text = str(key)
                if isinstance(key, str) and (problem := text_problem(key)) is not None:
                    yield f"{_where((*path, repr(key)))}: key {problem}"
                    continue
                stack.append((item, (*path, key_text), depth + 1))
        elif isinstance(value, str):
            if (problem := text_problem(value)) is not None:
                yield f"{_where(path)}: {problem}"
        elif isinstance(value, float) and not math.isfinite(value):
            yield f"{_where(path)}: {value} is not a JSON number"


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _size_problems(document: dict[str, Any], limits: RequestLimits) -> Iterator[str]:
    for key, value in document.items():
        if key == "input" and isinstance(value, dict) and isinstance(value.get("messages"), list):
            messages = value["messages"]
            if len(messages) > limits.max_messages:
                yield (
                    f"input.messages: {len(messages)} messages is more than {limits.max_messages} "
                    "(gateway.limits.max_messages in config.yaml)"
                )
                return
            for index, message in enumerate(messages):
                if (size := _size(message)) > limits.max_message_bytes:
                    yield (
                        f"input.messages.{index}: {size} bytes is more than {limits.max_message_bytes} "
                        "(gateway.limits.max_message_bytes in config.yaml)"
                    )
        elif (size := _size(value)) > limits.max_field_bytes:
            yield (
                f"{key}: {size} bytes is more than {limits.max_field_bytes} "
                "(gateway.limits.max_field_bytes in config.yaml)"
            )


def first_problem(document: Any, limits: RequestLimits) -> str | None:
    """The first reason to refuse a parsed request body, or None. Sizes are checked only
    once the text is known to encode (the size is that of the field's compact UTF-8 JSON)."""
    problem = next(_walk(document, limits.max_json_depth), None)
    if problem is None and isinstance(document, dict):
        problem = next(_size_problems(document, limits), None)
    return problem


def _parameter_problem(request: Request) -> str | None:
    for kind, params in (("path", request.path_params.items()), ("query", request.query_params.multi_items())):
        for name, value in params:
            if isinstance(value, str) and (problem := text_problem(value)) is not None:
                return f"{kind} parameter {name}: {problem}"
    return None


async def door(request: Request) -> None:
    """Refuse (422) a request whose parameters or JSON body the Gateway must not store."""
    problem = _parameter_problem(request)
    own_body = request.url.path.startswith(_OWN_BODY_PREFIXES)
    if problem is None and request.method in _WITH_BODY and not own_body and await request.body():
        try:
            document = await request.json()
        except (ValueError, RecursionError):
            return  # not JSON: the route's own body validation says so
        problem = first_problem(document, request.app.state.config.gateway.limits)
    if problem is not None:
        raise HTTPException(status_code=422, detail=problem)


def readable(value: dict[str, Any], what: str) -> dict[str, Any]:
    """``value`` as stored, or a placeholder saying why it cannot be shown.

    Rows written before the door bounded them (or by an extension through its own session)
    may be too deep to serialise or hold text no response can encode; one such row must
    not make every listing that includes it fail, so the row is shown without that field.
    """
    problem = next(_walk(value, JSON_DEPTH_CEILING, depth_hint=""), None)
    if problem is None:
        return value
    logger.warning("%s cannot be shown: %s", what, problem)
    return {"unreadable": f"{what} cannot be shown: {problem}"}
