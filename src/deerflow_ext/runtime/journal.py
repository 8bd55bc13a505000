"""A run's journal: the events run evidence readers page through, built as the run ends.

What DeerFlow's run journal records, under its event names and categories: the run's start
(``run.start``, trace), each message the run added to its thread (``llm.human.input``,
``llm.ai.response``, ``llm.tool.result``: message), and its end (``run.end``, outputs) or
failure (``run.error``, error). The messages are the final state's, from the first one the
run added: the graph's first ``values`` event holds the thread's earlier messages plus the
run's input, so those before the input are the thread's history, not this run's.

Cost: nothing while the run streams but one length read of its first state; at its end one
transaction appends every row (``HostStore.append_run_events``), before the run's status is
written, so a reader that sees the run ended finds its events. Only snapshots with something
that can read evidence (a service, a router or a plugin) journal at all, unless the operator
says otherwise (``gateway.run_journal``): a Gateway with no extension writes no row more than
before, and one whose extensions never read evidence can switch the write off.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..exception_text import exception_text
from ..persistence.models import RunStatus
from .wire import jsonable

__all__ = ["MAX_CONTENT_CHARS", "RunJournal", "append_journal", "journal_wanted"]

logger = logging.getLogger("deerflow_ext.runtime")

_MESSAGE_EVENTS = {"human": "llm.human.input", "ai": "llm.ai.response", "tool": "llm.tool.result"}
MAX_CONTENT_CHARS = 1_000_000
"""A message longer than this is journaled cut, with ``truncated`` in its metadata."""


def journal_wanted(extensions: Any) -> bool:
    """Whether a run under ``extensions`` is journaled: only when something can read it."""
    return bool(
        getattr(extensions, "services", ()) or getattr(extensions, "routers", ()) or getattr(extensions, "plugins", ())
    )


def _message_content(message: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    content = getattr(message, "content", "")
    metadata: dict[str, Any] = {}
    if isinstance(content, str) and len(content) > MAX_CONTENT_CHARS:
        content, metadata["truncated"] = content[:MAX_CONTENT_CHARS], True
    # Plain JSON whatever a content block holds (the journal's column is JSON).
    body: dict[str, Any] = {"type": message.type, "id": getattr(message, "id", None), "content": jsonable(content)}
    for name in ("name", "tool_call_id", "status"):
        value = getattr(message, name, None)
        if isinstance(value, str):
            body[name] = value
    calls = getattr(message, "tool_calls", None)
    if calls:
        body["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "args": jsonable(c.get("args"))} for c in calls
        ]
    return body, metadata


class RunJournal:
    """Collects what one run's journal needs while it runs; :meth:`rows` at its end."""

    __slots__ = ("first_count", "input_count", "run_id", "started_at")

    def __init__(self, run_id: str, input_count: int, started_at: datetime) -> None:
        self.run_id = run_id
        self.input_count = input_count
        self.started_at = started_at
        self.first_count: int | None = None

    def saw(self, mode: str, chunk: Any) -> None:
        """Called with every graph chunk; keeps the message count of the first state."""
        if self.first_count is None and mode == "values" and isinstance(chunk, Mapping):
            self.first_count = len(chunk.get("messages") or ())

    def tap(self, emit: Callable[[str, Any], Awaitable[None]]) -> Callable[[str, Any], Awaitable[None]]:
        """``emit``, seeing each chunk first."""

        async def tapped(mode: str, chunk: Any) -> None:
            self.saw(mode, chunk)
            await emit(mode, chunk)

        return tapped

    def rows(
        self, status: RunStatus, values: Mapping[str, Any] | None, answer: str | None, error: str | None, now: datetime
    ) -> list[dict[str, Any]]:
        rows = [self._row("run.start", "trace", None, {}, self.started_at)]
        messages: Sequence[Any] = (values or {}).get("messages") or ()
        if self.first_count is not None:
            for message in messages[max(self.first_count - self.input_count, 0) :]:
                event = _MESSAGE_EVENTS.get(getattr(message, "type", ""))
                if event is not None:
                    content, metadata = _message_content(message)
                    rows.append(self._row(event, "message", content, metadata, now))
        if status is RunStatus.ERROR:
            rows.append(self._row("run.error", "error", {"error": error}, {"status": status.value}, now))
        else:
            end = {"status": status.value, "answer": answer}
            rows.append(self._row("run.end", "outputs", end, {"status": status.value}, now))
        return rows

    def _row(self, event: str, category: str, content: Any, metadata: dict[str, Any], at: datetime) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "event_type": event,
            "category": category,
            "content": content,
            "metadata": metadata,
            "created_at": at,
        }


async def append_journal(store: Any, thread_id: str, journal: RunJournal, rows: list[dict[str, Any]]) -> None:
    """Append the rows; a failure is logged, never the run's (its status is still written)."""
    try:
        await store.append_run_events(thread_id, rows)
    except Exception as exc:
        logger.warning("run %s: could not journal its events (%s)", journal.run_id, exception_text(exc))
