"""Cap the number of subagents one run may delegate to."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ..context import context_value

__all__ = ["TASK_TOOL_NAME", "SubagentLimitMiddleware"]

TASK_TOOL_NAME = "task"


class SubagentLimitMiddleware(AgentMiddleware):
    """Refuses ``task`` calls beyond ``max_per_run`` with an error ``ToolMessage``.

    Counted at the tool call rather than by trimming the model's reply, so the model is
    told why the extra delegation did not happen and every tool call still gets an answer
    (a dangling tool call would make the next model request invalid).
    """

    def __init__(self, max_per_run: int) -> None:
        super().__init__()
        self.max_per_run = max_per_run
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def release_policy_parameters(self) -> dict[str, object]:
        return {"max_per_run": self.max_per_run}

    def _admit(self, request: ToolCallRequest) -> ToolMessage | None:
        if request.tool_call["name"] != TASK_TOOL_NAME:
            return None
        run_id = str(context_value(request.runtime, "run_id") or "")
        with self._lock:
            used = self._counts.get(run_id, 0)
            if used < self.max_per_run:
                self._counts[run_id] = used + 1
                return None
        return ToolMessage(
            content=f"Error: subagent limit reached ({self.max_per_run} per run); do the work directly.",
            tool_call_id=request.tool_call["id"],
            name=TASK_TOOL_NAME,
            status="error",
        )

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        refused = self._admit(request)
        return refused if refused is not None else handler(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        refused = self._admit(request)
        return refused if refused is not None else await handler(request)
