"""A test extension that shows a run's context, loaded as ``platform_api.context_echo_ext:install``.

A run whose last user message says ``echo-context`` writes one ``custom`` stream event,
``{"echo_context": {...}}``, holding the keys of its runtime context that start with
``echo_``: what a middleware of an extension sees of the context a client, or the assistant
the run runs as, supplied. Other runs pass through untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.config import get_stream_writer

from deerflow_extension_api import AgentBuildContext, ExtensionData, MiddlewarePlacement, Placement, extension

TRIGGER = "echo-context"


def _last_human_text(request: Any) -> str:
    for message in reversed(list(getattr(request, "messages", ()) or ())):
        if getattr(message, "type", None) == "human":
            return str(message.text)
    return ""


class EchoContext(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        if TRIGGER in _last_human_text(request):
            context = getattr(request.runtime, "context", None) or {}
            get_stream_writer()({"echo_context": {k: v for k, v in context.items() if k.startswith("echo_")}})
        return await handler(request)


class EchoContributor:
    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return (MiddlewarePlacement(EchoContext(), Placement.STANDARD),)


@extension(api="0.2.0", name="context-echo")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(EchoContributor())
