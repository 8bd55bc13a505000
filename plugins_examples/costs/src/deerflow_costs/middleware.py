"""The counting middlewares (LangChain v1 ``AgentMiddleware``).

They hold no state of their own: counts go into the task store recovered from the
LangGraph runtime, so one middleware instance can serve any number of concurrent tasks,
and a call made outside a DeerFlow task (no task store) is simply not counted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage

from deerflow_extension_api import task_store_from_runtime

from .accounting import Prices, TaskCosts

__all__ = ["TokenCounter", "ToolCallCounter", "ai_messages"]


def ai_messages(response: Any) -> Iterable[AIMessage]:
    """The AI messages in any shape a model handler may return.

    ``ModelCallResult`` is a ``ModelResponse`` (``.result``), an ``AIMessage``, or an
    ``ExtendedModelResponse`` wrapping a ``ModelResponse`` (``.model_response``).
    """
    if isinstance(response, AIMessage):
        return (response,)
    inner = getattr(response, "model_response", None)
    if inner is not None:
        response = inner
    return tuple(m for m in getattr(response, "result", ()) or () if isinstance(m, AIMessage))


def _count_response(runtime: Any, response: Any) -> None:
    store = task_store_from_runtime(runtime)
    if store is None:
        return
    costs = store.get_or_init(TaskCosts, TaskCosts)
    for message in ai_messages(response):
        usage = message.usage_metadata or {}
        input_tokens = int(usage.get("input_tokens", 0) or 0)
        output_tokens = int(usage.get("output_tokens", 0) or 0)
        total_tokens = int(usage.get("total_tokens", 0) or (input_tokens + output_tokens))
        costs.add_model_call(input_tokens, output_tokens, total_tokens)


class TokenCounter(AgentMiddleware):
    """Counts model calls and their token usage, placed at ``MODEL_LOGICAL``.

    At that placement it wraps the retry layer, so a call the host retried is one
    logical call whose usage is that of the answer the agent actually received.
    """

    def __init__(self, prices: Prices | None = None) -> None:
        super().__init__()
        self.prices = prices or Prices()

    def release_policy_parameters(self) -> dict[str, object]:
        return self.prices.as_policy()

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        response = handler(request)
        _count_response(getattr(request, "runtime", None), response)
        return response

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        response = await handler(request)
        _count_response(getattr(request, "runtime", None), response)
        return response


def _count_tool(request: Any) -> None:
    store = task_store_from_runtime(getattr(request, "runtime", None))
    if store is None:
        return
    name = str((getattr(request, "tool_call", None) or {}).get("name") or "unknown")
    store.get_or_init(TaskCosts, TaskCosts).add_tool_call(name)


class ToolCallCounter(AgentMiddleware):
    """Counts tool calls by tool name, placed at ``TOOL_VISIBLE``.

    The call is counted before it runs: a tool that fails was still a call the model
    made (and paid for in tokens).
    """

    def release_policy_parameters(self) -> dict[str, object]:
        return {"counts": "tool_calls_by_name"}

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        _count_tool(request)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        _count_tool(request)
        return await handler(request)
