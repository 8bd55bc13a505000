"""Memory: facts injected into each model call, extraction scheduled after each run."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import SystemMessage
from langgraph.runtime import Runtime

from deerflow_ext.extensions.contract.snapshot import resolve_run_extensions

from ..context import context_value
from .state import HostState

__all__ = ["MemoryMiddleware", "render_memory_block"]

logger = logging.getLogger(__name__)


def render_memory_block(facts: list[str]) -> str:
    return "<memory>\n" + "\n".join(f"- {fact}" for fact in facts) + "\n</memory>"


class MemoryMiddleware(AgentMiddleware[HostState, Any]):
    """Connects the agent to the host's ``MemoryManager``.

    Facts are added to the system message of each *request*, never to the configured
    prompt: they are per-run dynamic context, and the assembly descriptor's
    ``base_prompt_hash`` must not change when memory does. Extraction is only scheduled
    here; the manager runs it on its own thread with a debounce, after the run.
    """

    state_schema = HostState

    def __init__(self, memory: Any | None, *, enabled: bool = True) -> None:
        super().__init__()
        self.memory = memory
        self.enabled = enabled and memory is not None

    def release_policy_parameters(self) -> dict[str, object]:
        return {"enabled": self.enabled}

    def _with_facts(self, request: ModelRequest) -> ModelRequest:
        if not self.enabled:
            return request
        thread_id = context_value(request.runtime, "thread_id")
        if not thread_id:
            return request
        try:
            facts = list(self.memory.facts(thread_id))  # type: ignore[union-attr]
        except Exception:  # memory is an aid; a broken store must not fail the turn
            logger.exception("memory facts unavailable for thread %s", thread_id)
            return request
        if not facts:
            return request
        base = request.system_prompt or ""
        prompt = f"{base}\n\n{render_memory_block(facts)}" if base else render_memory_block(facts)
        return request.override(system_message=SystemMessage(content=prompt))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(self._with_facts(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(self._with_facts(request))

    def after_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        thread_id = context_value(runtime, "thread_id")
        if thread_id:
            ext = resolve_run_extensions(getattr(runtime, "context", None))
            self.memory.schedule(thread_id, list(state["messages"]), extensions=ext)  # type: ignore[union-attr]
        return None

    async def aafter_agent(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)
