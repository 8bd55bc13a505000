"""Title the thread after its first exchange."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.runtime import Runtime

from deerflow_ext.config.schema import TitleConfig
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions, resolve_run_extensions
from deerflow_extension_api import ExtensionData, task_store_from_runtime

from ..title import TitleCall
from .state import HostState
from .system_model import SystemModelMiddleware

__all__ = ["TitleMiddleware"]


def _first_exchange(messages: list[AnyMessage]) -> tuple[str, str] | None:
    question = next((m for m in messages if isinstance(m, HumanMessage)), None)
    answer = next((m for m in reversed(messages) if isinstance(m, AIMessage) and not m.tool_calls), None)
    if question is None or answer is None:
        return None
    return str(question.text), str(answer.text)


class TitleMiddleware(SystemModelMiddleware[TitleConfig]):
    """Generates ``state["title"]`` once, when the agent finishes its first exchange.

    ``after_agent`` rather than ``after_model``: a turn that ends in tool calls is not an
    exchange yet, and a title written mid-turn would describe the question only. Both paths
    are observed; see ``agents.title`` for why the sync one submits instead of awaiting. A
    failed (or, past ``timeout_seconds``, late) title call leaves the thread untitled and the
    run as it was.
    """

    released = ("enabled", "max_chars")

    def _pending(self, state: HostState) -> TitleCall | None:
        if not self.config.enabled or state.get("title"):
            return None
        exchange = _first_exchange(state["messages"])
        return None if exchange is None else TitleCall.of(self.model, *exchange, max_chars=self.config.max_chars)

    def after_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        call = self._pending(state)
        return None if call is None else _update(call.run(*_run_scope(runtime)))

    async def aafter_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        call = self._pending(state)
        return (
            None if call is None else _update(await call.arun(*_run_scope(runtime), within=self.config.timeout_seconds))
        )


def _run_scope(runtime: Runtime[Any]) -> tuple[LoadedExtensions, ExtensionData | None]:
    """The run's extension snapshot and task store, read from its runtime."""
    return resolve_run_extensions(getattr(runtime, "context", None)), task_store_from_runtime(runtime)


def _update(title: str | None) -> dict[str, Any] | None:
    return {"title": title} if title else None
