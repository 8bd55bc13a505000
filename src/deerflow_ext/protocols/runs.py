"""What the agent protocols need of the Gateway's runs: start one, wait for its answer,
let a stateless one go. The Gateway implements :class:`ServedRuns` with its run routes'
own functions, so a protocol's run is admitted, stored, hooked and streamed like any other.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..persistence.records import HostStore
from ..persistence.records.values import RunRecord
from ..runtime.handle import RunHandle
from ..runtime.manager import RunManager
from ..runtime.stream import END_EVENT, StreamEvent, follow

__all__ = ["HEARTBEAT", "RunCall", "RunRefused", "ServedRuns", "Serving", "StartedRun", "answer_text", "node_updates"]


@dataclass(frozen=True)
class RunCall:
    """One run a protocol asks for.

    ``thread_id`` None: a stateless run (a thread of its own, deleted once it ended);
    otherwise the run goes on that thread, which is created when it does not exist.
    ``resume`` (with ``resumes``) answers the thread's pending interrupt instead of adding
    ``messages``. ``stream_modes`` are the event kinds the run streams (empty: the final
    values only, as ``/runs/wait``).
    """

    assistant_id: str
    messages: tuple[Mapping[str, Any], ...] = ()
    thread_id: str | None = None
    resume: Any = None
    resumes: bool = False
    stream_modes: tuple[str, ...] = ()
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class StartedRun:
    thread_id: str
    run_id: str
    handle: RunHandle
    stateless: bool


class RunRefused(Exception):
    """The Gateway would not start the run (or cannot answer now); ``status`` is the HTTP
    status its API would have answered with, ``message`` its one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Serving(Protocol):
    """What the serving Gateway holds that the protocols read directly."""

    @property
    def engine(self) -> Any: ...
    @property
    def store(self) -> HostStore: ...
    @property
    def runs(self) -> RunManager: ...


class ServedRuns(Protocol):
    def serving(self) -> Serving:
        """The Gateway's runtime; raises :class:`RunRefused` (503) while it is not serving."""
        ...

    async def start(self, call: RunCall) -> StartedRun:
        """Start the run as the run routes do; raises :class:`RunRefused`."""
        ...

    async def final_values(self, run: StartedRun) -> Mapping[str, Any]:
        """Once the run ended: the thread's values, or ``{"__error__": ...}`` for a failed run."""
        ...

    def release(self, run: StartedRun) -> None:
        """A stateless run's thread goes once the run ended (nothing for a run on a thread)."""
        ...

    async def visible_run(self, run_id: str, action: str) -> RunRecord | None:
        """The run named ``run_id`` (on whichever thread) as the protocol request's user may
        ``action`` it (``read``, ``update``), as the run routes scope a run by its thread:
        None for a missing run and for another user's (``auth``), alike, so an A2A task id
        tells nobody else whether it exists."""
        ...

    async def pending_interrupts(self, thread_id: str) -> tuple[Any, ...]:
        """The values of the interrupts the thread's graph is paused on (a human-in-the-loop
        question), as JSON data; empty when it is idle or was stopped by a cancel."""
        ...


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or (isinstance(part, Mapping) and part.get("type", "text") == "text")
        )
    return ""


def answer_text(values: Mapping[str, Any]) -> str | None:
    """The run's final answer: the text of the last AI message of the thread's values
    (None when there is none)."""
    messages = values.get("messages")
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("type") in ("ai", "AIMessage", "AIMessageChunk"):
            return _text(message.get("content"))
    return None


HEARTBEAT = 15.0
"""Seconds a protocol's follower of a run waits on a silent run before looking again."""


async def node_updates(runs: ServedRuns, run_id: str) -> AsyncIterator[Mapping[str, Any]]:
    """The run's ``updates`` events as they come (node name -> what it wrote), until its end:
    what MCP's progress and A2A's status updates both tell of a run that is working."""
    async for item in follow(runs.serving().runs.streams, run_id, None, heartbeat=HEARTBEAT):
        if not isinstance(item, StreamEvent):  # a heartbeat, or events no longer retained
            continue
        if item.event == END_EVENT:
            return
        if item.event == "updates":
            update = json.loads(item.data)
            if isinstance(update, Mapping):
                yield update
