"""LangGraph Platform stream modes: which graph streams a run needs, and the SSE events
they become.

A client names *API* stream modes (``langgraph_sdk``'s ``stream_mode``); the graph streams
*LangGraph* modes. Most map one to one and keep their name as the event name (``values``,
``updates``, ``custom``, ``debug``, ``tasks``, ``checkpoints``). LangGraph's ``messages``
mode feeds two API modes:

* ``messages-tuple``: each ``(message chunk, metadata)`` pair as is, event ``messages``;
* ``messages``: the Platform's accumulated form — ``messages/metadata`` the first time a
  message id is seen, then ``messages/partial`` with the message *so far* after every
  chunk, or ``messages/complete`` for a message that arrived whole.

With ``stream_subgraphs`` the graph tags events from subgraphs with their namespace; the
event name carries it as ``values|node:id``, as the Platform does.

``events`` is LangChain's callback events (``astream_events`` v2), one SSE event each, as
LangGraph Platform sends them; only a run that asks for it pays for the callbacks.
``tools`` and ``lifecycle`` are accepted and produce nothing: they belong to other APIs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from langchain_core.messages import BaseMessageChunk, message_chunk_to_message

__all__ = [
    "ALWAYS_SENT",
    "API_STREAM_MODES",
    "DEFAULT_STREAM_MODES",
    "WAIT_STREAM_MODES",
    "ApiStreamMode",
    "StreamProjection",
    "graph_stream_modes",
    "mode_of_event",
]

ApiStreamMode = Literal[
    "values",
    "messages",
    "updates",
    "events",
    "tasks",
    "checkpoints",
    "debug",
    "custom",
    "messages-tuple",
    "tools",
    "lifecycle",
]
API_STREAM_MODES: tuple[str, ...] = ApiStreamMode.__args__  # type: ignore[attr-defined]

DEFAULT_STREAM_MODES: tuple[str, ...] = ("values", "updates", "messages-tuple")
"""What a run streams when the client names no mode. LangGraph Platform's default is
``values`` alone; the official SDKs always send ``stream_mode``, so only hand-written
clients see this, and they keep what the Gateway always streamed."""

WAIT_STREAM_MODES: tuple[str, ...] = ("values",)
"""What a ``/wait`` run streams when the client names no mode (``langgraph_sdk``'s
``runs.wait`` names none): LangGraph Platform's default. Its client reads only the final
values, and the ``messages`` mode alone costs a trivial run a callback on every runnable
(~2.5 of 13 ms in-process); a ``join_stream`` of such a run gets its values."""

ALWAYS_SENT = frozenset({"metadata", "error", "end", "not_retained"})
"""Events every reader gets, whatever modes it asked for."""

_GRAPH_MODE = {
    "values": "values",
    "updates": "updates",
    "messages": "messages",
    "messages-tuple": "messages",
    "custom": "custom",
    "debug": "debug",
    "tasks": "tasks",
    "checkpoints": "checkpoints",
}


def graph_stream_modes(api_modes: Iterable[str]) -> tuple[str, ...]:
    """The LangGraph stream modes a run must request to produce ``api_modes``.

    ``values`` is always included: the host reads the final state from it.
    """
    modes = {"values", *(_GRAPH_MODE[m] for m in api_modes if m in _GRAPH_MODE)}
    return tuple(sorted(modes))


def mode_of_event(event: str) -> str | None:
    """The API stream mode an event belongs to; None for events every reader gets."""
    base = event.partition("|")[0]
    if base in ALWAYS_SENT:
        return None
    if base.startswith("messages/"):
        return "messages"
    if base == "messages":
        return "messages-tuple"
    return base


class StreamProjection:
    """Turns one run's graph stream into the SSE events its client asked for.

    Stateful (it accumulates message chunks for ``messages``), so there is one per run.
    """

    def __init__(self, api_modes: Sequence[str]) -> None:
        self.modes = frozenset(api_modes)
        self._tuples = "messages-tuple" in self.modes
        self._accumulated = "messages" in self.modes
        self._partial: dict[str, BaseMessageChunk] = {}
        self._seen: set[str] = set()

    def events(self, mode: str, chunk: Any) -> list[tuple[str, Any]]:
        base, bar, namespace = mode.partition("|")
        if base != "messages":
            return [(mode, chunk)] if base in self.modes else []
        out: list[tuple[str, Any]] = []
        if self._tuples:
            out.append((mode, chunk))
        if self._accumulated:
            out.extend(self._messages(chunk, bar + namespace))
        return out

    def _messages(self, chunk: Any, suffix: str) -> list[tuple[str, Any]]:
        message, metadata = chunk
        message_id = getattr(message, "id", None) or ""
        out: list[tuple[str, Any]] = []
        if message_id not in self._seen:
            self._seen.add(message_id)
            out.append((f"messages/metadata{suffix}", {message_id: {"metadata": metadata}}))
        if isinstance(message, BaseMessageChunk):
            so_far = self._partial.get(message_id)
            so_far = message if so_far is None else so_far + message
            self._partial[message_id] = so_far
            out.append((f"messages/partial{suffix}", [message_chunk_to_message(so_far)]))
        else:
            self._partial.pop(message_id, None)
            out.append((f"messages/complete{suffix}", [message]))
        return out
