"""Clarification: the agent may stop and ask the user instead of guessing."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.runtime import Runtime

from .state import HostState

__all__ = ["CLARIFICATION_TOOL_NAME", "ClarificationMiddleware"]

CLARIFICATION_TOOL_NAME = "ask_clarification"


@tool(CLARIFICATION_TOOL_NAME)
def ask_clarification(question: str) -> str:
    """Ask the user a clarifying question and end the turn until they answer."""
    return question


class ClarificationMiddleware(AgentMiddleware[HostState, Any]):
    """Turns an ``ask_clarification`` call into the turn's final answer.

    Last in the stack, so its ``after_model`` runs first on the model's reply: the question
    reaches the user before any other middleware can act on the pending tool call.
    """

    state_schema = HostState
    tools = (ask_clarification,)

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        last = state["messages"][-1] if state["messages"] else None
        if not isinstance(last, AIMessage):
            return None
        asks = [tc for tc in last.tool_calls if tc["name"] == CLARIFICATION_TOOL_NAME]
        if not asks:
            return None
        question = str(asks[0]["args"].get("question", "")).strip() or "Could you clarify your request?"
        # Same id: add_messages replaces the reply instead of appending a second one.
        return {"jump_to": "end", "messages": [AIMessage(content=question, id=last.id)]}

    @hook_config(can_jump_to=["end"])
    async def aafter_model(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_model(state, runtime)
