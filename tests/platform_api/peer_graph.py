"""The peer's graph for ``nox -s compat``: LangGraph's own server (``langgraph dev``) serves it
as ``lead_agent``, so the LangGraph Platform suite's cases run against it unchanged.

It has the lead agent's shape where the suite looks: a LangChain v1 ``create_agent`` on a
deterministic offline model that calls the ``task`` tool for ``delegate: <task>`` and answers
anything else, with LangChain's ``HumanInTheLoopMiddleware`` gating ``task`` as the suite's
``hitl_ext`` extension does on ours, and a ``title`` in its state once it has answered, as the
lead agent names a thread (a thread search filters on it). A message with ``gate:<name>`` holds the model call (for a
minute, or until the run is cancelled), as ours holds it at the suite's gate extension, so a case
can act on a run certainly in progress. It imports nothing of deerflow-ext: the peer runs in a
virtualenv of its own.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any, NotRequired

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, HumanInTheLoopMiddleware
from langchain.agents.middleware.types import OmitFromInput
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

HOLD_SECONDS = 60.0
"""How long a ``gate:`` message holds the model call: longer than any case waits before it
cancels the run (the peer has no gate file to open)."""


class RuleModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "rules"

    def bind_tools(self, tools: Any, **kwargs: Any) -> RuleModel:
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        last = messages[-1]
        text = str(last.content)
        if last.type == "human" and text.startswith("delegate:"):
            call = {"name": "task", "args": {"description": text[9:].strip()}, "id": f"call_{uuid.uuid4().hex[:8]}"}
            message = AIMessage("", tool_calls=[call], id=str(uuid.uuid4()))
        elif last.type == "tool":
            message = AIMessage(f"The task returned: {text}", id=str(uuid.uuid4()))
        else:
            message = AIMessage(f"Here is my answer to: {text}", id=str(uuid.uuid4()))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        return self._reply(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        if messages[-1].type == "human" and "gate:" in str(messages[-1].content):
            await asyncio.sleep(HOLD_SECONDS)
        return self._reply(messages)


@tool
def task(description: str) -> str:
    """Delegate a task to a subagent."""
    return f"done: {description}"


class TitledState(AgentState[Any]):
    title: NotRequired[Annotated[str, OmitFromInput]]


class Title(AgentMiddleware[TitledState]):
    """Names the thread after its first message when the agent has answered, once."""

    state_schema = TitledState

    def after_agent(self, state: TitledState, runtime: Any) -> dict[str, Any] | None:
        first = next((m for m in state["messages"] if m.type == "human"), None)
        if state.get("title") or first is None:
            return None
        return {"title": str(first.content)[:60]}


graph = create_agent(
    RuleModel(),
    tools=[task],
    system_prompt="You are a helpful assistant.",
    middleware=[
        HumanInTheLoopMiddleware(interrupt_on={"task": {"allowed_decisions": ["approve", "reject"]}}),
        Title(),
    ],
)
