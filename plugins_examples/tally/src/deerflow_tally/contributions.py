"""The three contributions that count: a tool-call middleware, a lifecycle folder, an observer.

The middleware observes only (the host enforces that for every extension that does not ask
for ``intercept: true``): it notes the call and hands the request on untouched, on both the
sync and the async path, so it counts tool calls however the agent runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import (
    AgentBuildContext,
    ExtensionData,
    MiddlewarePlacement,
    Placement,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
    TaskInfo,
    TaskOutcome,
    task_store_from_runtime,
)

from .counts import Tally, TaskCounts

__all__ = ["SystemCallCounter", "TaskFolder", "ToolCallCounter", "ToolCounting"]


def _note_tool_call(request: Any) -> None:
    store = task_store_from_runtime(getattr(request, "runtime", None))
    if store is None:  # no live task (a direct graph call): nothing to count into
        return
    name = (getattr(request, "tool_call", None) or {}).get("name") or "unknown"
    # get_or_init, not get: the task's on_task_start may have been skipped (another
    # extension spent the shared budget), and its tool calls must still count.
    store.get_or_init(TaskCounts, TaskCounts).tool_called(str(name))


class ToolCallCounter(AgentMiddleware):  # type: ignore[type-arg]
    """Counts each tool call as the model made it (``TOOL_VISIBLE``), failed ones included."""

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        _note_tool_call(request)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        _note_tool_call(request)
        return await handler(request)


class ToolCounting:
    """Contributes one ``ToolCallCounter`` to every agent, lead and subagent alike."""

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return (MiddlewarePlacement(ToolCallCounter(), Placement.TOOL_VISIBLE),)


class TaskFolder:
    """Gives each task its counts when it starts, and folds them into the tally when it stops."""

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        task_store.get_or_init(TaskCounts, TaskCounts)

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        # The start may have been skipped (another extension spent the shared budget).
        counts = task_store.remove(TaskCounts)
        app_store.get_or_init(Tally, Tally).task_stopped(info.kind, outcome, counts.by_tool() if counts else {})


class SystemCallCounter:
    """Counts DeerFlow's own model calls by kind, and how many of them failed."""

    async def on_system_model_call(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        kind: SystemOperationKind,
        request: SystemModelRequest,
        result: SystemModelResult,
    ) -> None:
        app_store.get_or_init(Tally, Tally).system_call(kind, failed=result.error is not None)
