"""Thread data: where the run's identity enters state."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.runtime import Runtime

from ..context import context_value
from .state import HostState

__all__ = ["ThreadDataMiddleware"]


class ThreadDataMiddleware(AgentMiddleware[HostState, Any]):
    """Records the thread and run a turn belongs to.

    Outermost in the stack so every later hook, and every checkpoint, can tell which run
    wrote it without reaching back into the runtime context.
    """

    state_schema = HostState

    def before_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        data = {
            "thread_id": context_value(runtime, "thread_id"),
            "run_id": context_value(runtime, "run_id"),
            "agent_name": context_value(runtime, "agent_name"),
        }
        if state.get("thread_data") == data:
            return None
        return {"thread_data": data}

    async def abefore_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)
