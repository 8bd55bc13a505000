"""Test extensions around a tool call that pauses, loaded by name from ``config.yaml``:

- ``tool_interrupt_ext:observe`` — a middleware that only observes tool calls, recording each
  it sees to a file (across processes), so a test can count what really ran;
- ``tool_interrupt_ext:ask`` — a middleware whose ``wrap_tool_call`` asks a human with
  LangGraph's ``interrupt()`` before the tool runs, and runs it only on ``"yes"``;
- ``tool_interrupt_ext:broken`` — a middleware whose ``before_model`` raises: isolated, it
  fails open, and must not turn the pause above into a failure.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph.types import interrupt

from deerflow_extension_api import AgentBuildContext, ExtensionData, MiddlewarePlacement, Placement, extension


class Observe(AgentMiddleware):
    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        result = await handler(request)
        with self.log.open("a") as out:
            out.write(json.dumps({"tool": request.tool_call["name"], "status": getattr(result, "status", None)}) + "\n")
        return result


class Ask(AgentMiddleware):
    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        answer = interrupt({"question": f"run {request.tool_call['name']}?"})
        if answer != "yes":
            return ToolMessage(content="declined", tool_call_id=request.tool_call["id"], status="error")
        return await handler(request)


class Broken(AgentMiddleware):
    def before_model(self, state: Any, runtime: Any) -> None:
        raise RuntimeError("broken before_model")


class _Contributes:
    def __init__(self, middleware: AgentMiddleware) -> None:
        self.middleware = middleware

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return (MiddlewarePlacement(self.middleware, Placement.STANDARD),)


@extension(api="0.2.0", name="observe-tools")
def observe(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(_Contributes(Observe(Path(config["log"]))))


@extension(api="0.2.0", name="ask-before-tools")
def ask(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(_Contributes(Ask()))


@extension(api="0.2.0", name="broken-before-model")
def broken(registry: Any, config: Mapping[str, Any]) -> None:
    registry.middlewares(_Contributes(Broken()))
