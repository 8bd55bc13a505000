"""The notebook: each user's notes in memory, and the handlers the plugin registers.

Notes belong to ``context.principal.user_id``: the host authenticates the caller, the
plugin decides what that caller may see (its own notes only). They live in the Gateway
process, so a restart forgets them; a real plugin would keep them in a store of its own.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from typing import Any

from deerflow_extension_api import ActionContext, AgentRunError, ToolContext

__all__ = ["ASK_TIMEOUT_SECONDS", "MAX_NOTE_CHARS", "NAMESPACE", "REMEMBER_SCHEMA", "Notebook"]

NAMESPACE = "example.notes"
MAX_NOTE_CHARS = 2000
ASK_TIMEOUT_SECONDS = 25.0  # under the host's 30 s for an action

REMEMBER_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_CHARS}},
    "required": ["text"],
    "additionalProperties": False,
}


def _text(payload: Mapping[str, Any]) -> str:
    text = payload.get("text")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_NOTE_CHARS:
        raise ValueError(f"text must be a non-blank string of at most {MAX_NOTE_CHARS} characters")
    return text.strip()


class Notebook:
    """Per-user notes, newest last, at most the ``max_notes`` setting per user."""

    def __init__(self) -> None:
        self._notes: dict[str, deque[dict[str, Any]]] = {}
        self._lock = asyncio.Lock()

    async def _add(self, user_id: str, note: dict[str, Any], limit: Any) -> dict[str, Any]:
        async with self._lock:
            kept = self._notes.setdefault(user_id, deque())
            kept.append(note)
            while len(kept) > int(limit):
                kept.popleft()
            return {"saved": note, "count": len(kept)}

    async def remember_tool(self, payload: Mapping[str, Any], context: ToolContext) -> Any:
        """The model tool: the host checked ``payload`` against ``REMEMBER_SCHEMA`` already."""
        note = {"text": _text(payload), "source": "agent", "thread_id": context.thread_id}
        return await self._add(context.principal.user_id, note, context.settings["max_notes"])

    async def add_action(self, payload: Mapping[str, Any], context: ActionContext) -> Any:
        """``add``: a note from the browser (``ValueError`` is the host's 422)."""
        thread_id = payload.get("thread_id")
        note = {
            "text": _text(payload),
            "source": "user",
            "thread_id": thread_id if isinstance(thread_id, str) else None,
        }
        return await self._add(context.principal.user_id, note, context.settings["max_notes"])

    async def list_action(self, payload: Mapping[str, Any], context: ActionContext) -> Any:
        """``list``: the caller's notes, newest first, and the page's heading."""
        async with self._lock:
            notes = list(reversed(self._notes.get(context.principal.user_id, ())))
        return {"heading": context.settings["heading"], "notes": notes, "limit": context.settings["max_notes"]}

    async def clear_action(self, payload: Mapping[str, Any], context: ActionContext) -> Any:
        """``clear``: forget the caller's notes."""
        async with self._lock:
            dropped = len(self._notes.pop(context.principal.user_id, ()))
        return {"cleared": dropped}

    async def ask_action(self, payload: Mapping[str, Any], context: ActionContext) -> Any:
        """``ask``: a question the agent answers in a run of the caller's own (the host's
        ``agent_runs`` handle), on a thread of the caller's; the answer is kept as a note.
        A host without agent runs is the action's 503."""
        runs = context.agent_runs
        if runs is None:
            raise AgentRunError(503, "this host does not start agent runs for plugins")
        question = _text(payload)
        thread_id = await runs.create_thread(metadata={"source": NAMESPACE})
        run = await runs.start(thread_id=thread_id, input={"messages": [{"role": "user", "content": question}]})
        run = await runs.wait(thread_id=thread_id, run_id=run.run_id, timeout=ASK_TIMEOUT_SECONDS)
        state = await runs.get_state(thread_id=thread_id)
        messages = state.get("values", {}).get("messages", [])
        answer = str(messages[-1].get("content", "")) if messages else ""
        note = {"text": answer[:MAX_NOTE_CHARS], "source": "agent-run", "thread_id": thread_id}
        saved = await self._add(context.principal.user_id, note, context.settings["max_notes"])
        return {**saved, "status": run.status}
