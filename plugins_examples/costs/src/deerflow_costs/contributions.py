"""How the costs extension plugs into the host: middleware, lifecycle and a store handle."""

from __future__ import annotations

from collections.abc import Sequence

from deerflow_extension_api import (
    AgentBuildContext,
    ExtensionData,
    ExtensionRuntimeDeps,
    MiddlewarePlacement,
    Placement,
    TaskInfo,
    TaskOutcome,
)

from .accounting import CostTotals, Prices, TaskCosts
from .middleware import TokenCounter, ToolCallCounter

__all__ = ["CostLedger", "CostMiddlewares", "StoreHandle"]


class CostMiddlewares:
    """Contributes fresh counters to every agent, lead and subagent alike."""

    def __init__(self, prices: Prices) -> None:
        self.prices = prices

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return (
            MiddlewarePlacement(TokenCounter(self.prices), Placement.MODEL_LOGICAL),
            MiddlewarePlacement(ToolCallCounter(), Placement.TOOL_VISIBLE),
        )


class CostLedger:
    """Folds each task's counts into the app-store totals when the task stops.

    A task whose middleware never ran (no model call) still counts as a task; a missing
    ``TaskCosts`` is folded as zeros rather than skipped.
    """

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        task_store.get_or_init(TaskCosts, TaskCosts)

    async def on_task_stop(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        info: TaskInfo,
        outcome: TaskOutcome,
    ) -> None:
        costs = task_store.get(TaskCosts) or TaskCosts()
        app_store.get_or_init(CostTotals, CostTotals).fold(info.kind, costs.snapshot())


class StoreHandle:
    """A service whose only job is to lend the router the app store.

    ``install`` never sees the app store and a router handler receives only the
    request, so the Gateway-lifetime service is the contract's way to reach it.
    """

    def __init__(self) -> None:
        self.app_store: ExtensionData | None = None

    async def start(self, deps: ExtensionRuntimeDeps) -> None:
        self.app_store = deps.app_store

    async def stop(self) -> None:
        self.app_store = None
