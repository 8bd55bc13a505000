"""Title the thread after its first exchange."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.runtime import Runtime

from deerflow_ext.config.schema import TitleConfig
from deerflow_ext.extensions.snapshot import resolve_run_extensions
from deerflow_extension_api import task_store_from_runtime

from ..title import generate_title, generate_title_sync
from .state import HostState

__all__ = ["TitleMiddleware"]


def _first_exchange(messages: list[AnyMessage]) -> tuple[str, str] | None:
    question = next((m for m in messages if isinstance(m, HumanMessage)), None)
    answer = next((m for m in reversed(messages) if isinstance(m, AIMessage) and not m.tool_calls), None)
    if question is None or answer is None:
        return None
    return str(question.text), str(answer.text)


class TitleMiddleware(AgentMiddleware[HostState, Any]):
    """Generates ``state["title"]`` once, when the agent finishes its first exchange.

    ``after_agent`` rather than ``after_model``: a turn that ends in tool calls is not an
    exchange yet, and a title written mid-turn would describe the question only. Both paths
    are observed; see ``agents.title`` for why the sync one submits instead of awaiting.
    """

    state_schema = HostState

    def __init__(self, config: TitleConfig, model: BaseChatModel) -> None:
        super().__init__()
        self.config = config
        self.model = model

    def release_policy_parameters(self) -> dict[str, object]:
        return {"enabled": self.config.enabled, "max_chars": self.config.max_chars}

    def _pending(self, state: HostState) -> tuple[str, str] | None:
        if not self.config.enabled or state.get("title"):
            return None
        return _first_exchange(state["messages"])

    def after_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        exchange = self._pending(state)
        if exchange is None:
            return None
        title = generate_title_sync(
            self.model,
            *exchange,
            max_chars=self.config.max_chars,
            extensions=resolve_run_extensions(getattr(runtime, "context", None)),
            task_store=task_store_from_runtime(runtime),
        )
        return {"title": title} if title else None

    async def aafter_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        exchange = self._pending(state)
        if exchange is None:
            return None
        title = await generate_title(
            self.model,
            *exchange,
            max_chars=self.config.max_chars,
            extensions=resolve_run_extensions(getattr(runtime, "context", None)),
            task_store=task_store_from_runtime(runtime),
        )
        return {"title": title} if title else None
