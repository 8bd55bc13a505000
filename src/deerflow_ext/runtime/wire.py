"""How run data is put on the wire: plain JSON, encoded once.

A stream event is serialised when it is published, not when it is sent: the same text goes
to every subscriber, into Redis, and into the replay buffer, so ten clients watching a run
cost one ``json.dumps`` per event, not ten.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["UNSEARCHED_STATE_KEYS", "dumps", "jsonable", "searchable_values"]

UNSEARCHED_STATE_KEYS = frozenset({"messages", "__interrupt__"})
"""State keys a thread search's ``values`` filter does not see: the conversation (the bulk
of a state, written once per run would cost every run its size) and a pause's interrupts."""


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass instance's set fields: LangGraph's ``Interrupt`` is one, and LangGraph
    Platform sends it as ``{"value": ..., "id": ...}`` (a field left None is left out)."""
    return {f.name: v for f in dataclasses.fields(value) if (v := getattr(value, f.name)) is not None}


def jsonable(value: Any) -> Any:
    """Plain JSON data from graph output: LangChain messages are pydantic models and
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
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(_fields(value))
    return str(value)


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump()
        except Exception:
            return str(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    return str(value)


def dumps(value: Any) -> str:
    """Compact JSON text of ``jsonable(value)``; it never contains a raw newline, so it fits
    one SSE ``data:`` line.

    Speed: json's C encoder walks dicts, lists and tuples itself and calls back only for
    what it does not know (a LangChain message, a set); a Python pre-pass over the whole
    value cost most of an event's publishing. Keys json cannot take (a tuple key) and
    cycles go the slow way, through :func:`jsonable`.
    """
    try:
        return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(jsonable(value), default=str, ensure_ascii=False, separators=(",", ":"))


def searchable_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A state's values as a thread search's ``values`` filter reads them (the thread's
    ``state_values``): plain JSON, without :data:`UNSEARCHED_STATE_KEYS`."""
    return {str(k): jsonable(v) for k, v in values.items() if k not in UNSEARCHED_STATE_KEYS}
