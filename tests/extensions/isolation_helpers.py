"""Shared by the isolation tests: a scripted chat model, a counting tool, and how to run them.

The model and the tool count their calls, which is what "the downstream call happened exactly
once" is measured by under a real ``create_agent`` graph.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware

EXT = "acme_audit:install"
_ids = itertools.count()


class ScriptedModel(BaseChatModel):
    """Replies from a script (one reply per call, last one repeated) and counts calls."""

    script: list[AIMessage]
    calls: list[int]
    fail_with: Exception | None = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(len(messages))
        if self.fail_with is not None:
            raise self.fail_with
        reply = self.script[min(len(self.calls) - 1, len(self.script) - 1)]
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy(update={"id": f"m{next(_ids)}"}))])


def scripted(*replies: AIMessage, fail_with: Exception | None = None) -> ScriptedModel:
    return ScriptedModel(script=list(replies) or [AIMessage("done")], calls=[], fail_with=fail_with)


tool_runs: list[str] = []


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    tool_runs.append(text)
    return f"echo: {text}"


def call_echo() -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "echo", "args": {"text": "hi"}, "id": f"call{next(_ids)}"}])


async def run(agent: Any, mode: str) -> dict[str, Any]:
    payload = {"messages": [{"role": "user", "content": "hello"}]}
    if mode == "sync":
        return agent.invoke(payload)  # type: ignore[no-any-return]
    return await agent.ainvoke(payload)  # type: ignore[no-any-return]


def isolate(
    mw: AgentMiddleware, diagnostics: DiagnosticsList, index: int = 1, *, intercept: bool = False
) -> IsolatedMiddleware:
    return IsolatedMiddleware(mw, extension=EXT, index=index, diagnostics=diagnostics, intercept=intercept)


class AnswersForTheModel(AgentMiddleware):
    """A deciding middleware: answers every model call itself (a cache, a canned policy reply)."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        from langchain.agents.middleware.types import ModelResponse

        return ModelResponse(result=[AIMessage("answered by the gate")])

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return self.wrap_model_call(request, handler)


class _Gate:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
        from deerflow_extension_api import MiddlewarePlacement, Placement

        return [MiddlewarePlacement(AnswersForTheModel(), Placement.MODEL_LOGICAL)]


def install_gate(registry: Any, config: Any) -> None:
    """``use: extensions.isolation_helpers:install_gate``."""
    registry.middlewares(_Gate())
