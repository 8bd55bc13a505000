"""What ``streaming.py``'s clients saw, and the checks of ``--verify`` on it.

Kept apart from the measuring so the record of a conversation (its turns, each token's
arrival, its events' ids) has one definition that both the figures and the checks read.
The checks ask the server only through ``langgraph_sdk``, as a user would: the thread's
state (what our checkpointer stored in our database) and ``join_stream`` with
``Last-Event-ID`` (what a client reconnecting after a dropped connection gets).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient
from stream_provider import reply_text

__all__ = ["Conversation", "Turn", "sdk_client", "verify_conversations"]

CHECKS_AT_ONCE = 16


@dataclass
class Turn:
    """One ``runs.stream`` call as the client saw it."""

    thread_id: str
    run_id: str | None
    question: str
    start: float
    end: float = 0.0
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (time, tokens in the chunk)
    event_ids: list[str] = field(default_factory=list)
    text: str = ""

    @property
    def tokens(self) -> int:
        return sum(k for _, k in self.arrivals)


@dataclass
class Conversation:
    """One client's thread and its turns; ``error`` is the first thing that went wrong."""

    index: int
    tool_turns: int = 0
    thread_id: str | None = None
    turns: list[Turn] = field(default_factory=list)
    error: str | None = None


def sdk_client(url: str) -> LangGraphClient:
    """A langgraph_sdk client without httpx's default cap of 100 connections (which would
    queue conversations in the client past N = 100) and without transport retries."""
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=None, max_keepalive_connections=None))
    timeout = httpx.Timeout(connect=30, read=300, write=300, pool=30)
    return LangGraphClient(httpx.AsyncClient(base_url=url, transport=transport, timeout=timeout))


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return content if isinstance(content, str) else ""


async def _stored(client: LangGraphClient, conversation: Conversation) -> str | None:
    """Why the thread's stored messages are not the conversation's, or None."""
    if conversation.thread_id is None:
        return "no thread"
    state = await client.threads.get_state(conversation.thread_id)
    values = state.get("values")
    messages: list[dict[str, Any]] = values.get("messages", []) if isinstance(values, dict) else []
    questions = [_text(m) for m in messages if m.get("type") == "human"]
    replies = [_text(m) for m in messages if m.get("type") == "ai" and _text(m)]
    tools = [m for m in messages if m.get("type") == "tool"]
    if questions != [t.question for t in conversation.turns]:
        return f"thread {conversation.thread_id}: {len(questions)} questions stored of {len(conversation.turns)}"
    if replies != [reply_text()] * len(conversation.turns):
        return f"thread {conversation.thread_id}: {len(replies)} replies stored, not the {len(conversation.turns)} sent"
    if len(tools) != conversation.tool_turns:
        return f"thread {conversation.thread_id}: {len(tools)} tool messages stored of {conversation.tool_turns}"
    return None


async def _resumed(client: LangGraphClient, turn: Turn) -> str | None:
    """Why joining the turn's run after its middle event does not replay the rest, or None."""
    if turn.run_id is None or len(turn.event_ids) < 2:
        return f"run of thread {turn.thread_id}: no run id or events to resume from"
    cut = len(turn.event_ids) // 2
    replayed = [
        part.id
        async for part in client.runs.join_stream(turn.thread_id, turn.run_id, last_event_id=turn.event_ids[cut])
        if part.id is not None
    ]
    if replayed != turn.event_ids[cut + 1 :]:
        expected = len(turn.event_ids) - cut - 1
        return f"run {turn.run_id}: {len(replayed)} events replayed after its event {cut}, {expected} expected"
    return None


async def verify_conversations(url: str, conversations: Sequence[Conversation]) -> str:
    """Check every conversation's stored messages and every turn's resumable stream; one line."""
    client = sdk_client(url)
    gate = asyncio.Semaphore(CHECKS_AT_ONCE)
    problems: list[str] = []

    async def check(conversation: Conversation) -> None:
        async with gate:
            try:
                found = [await _stored(client, conversation)]
                found += [await _resumed(client, turn) for turn in conversation.turns]
            except Exception as exc:
                found = [f"thread {conversation.thread_id}: {type(exc).__name__}: {exc}"[:300]]
            problems.extend(problem for problem in found if problem)

    try:
        await asyncio.gather(*(check(c) for c in conversations if c.error is None))
    finally:
        await client.http.client.aclose()
    checked = sum(1 for c in conversations if c.error is None)
    runs = sum(len(c.turns) for c in conversations if c.error is None)
    verdict = "all stored and resumable" if not problems else f"{len(problems)} problems, first: {problems[0]}"
    return f"{checked} threads and {runs} runs checked ({len(conversations) - checked} skipped: errors): {verdict}"
