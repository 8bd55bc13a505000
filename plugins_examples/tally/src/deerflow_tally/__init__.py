"""An extension in DeerFlow's own shape: every contribution kind of its contract, one route.

It counts what a Gateway does — tool calls (a middleware), task outcomes (the lifecycle
pair), DeerFlow's own model calls by kind (an observer) — and reports the totals at
``GET /api/ext/tally/stats`` (a router, fed by a service). It depends on
``deerflow-extension-api`` alone and imports nothing from the host, so it runs unchanged on
any host of the contract's 0.2 line::

    plugins:
      - package: deerflow-tally      # informational, as DeerFlow's extension manager writes it
        use: deerflow_tally:install  # or the entry-point name: tally
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_extension_api import ExtensionInstall, ExtensionRegistry, extension

from .contributions import SystemCallCounter, TaskFolder, ToolCallCounter, ToolCounting
from .counts import Tally, TaskCounts
from .stats import StatsService, stats_router

__all__ = [
    "StatsService",
    "SystemCallCounter",
    "Tally",
    "TaskCounts",
    "TaskFolder",
    "ToolCallCounter",
    "ToolCounting",
    "install",
    "stats_router",
]


@extension(api="0.2", name="tally")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    """Register the counting middleware, the lifecycle folder, the observer and the stats route."""
    service = StatsService()
    registry.middlewares(ToolCounting())
    registry.task_lifecycle(TaskFolder())
    registry.system_model_observer(SystemCallCounter())
    registry.service(service)
    registry.routers([stats_router(service)])


_typed: ExtensionInstall = install  # install() has the contract's shape
