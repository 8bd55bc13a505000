"""Token and tool-call accounting per task, folded into process totals.

Two middlewares count inside each task's own store (``TokenCounter`` at
``MODEL_LOGICAL``, so a retried call counts once; ``ToolCallCounter`` at
``TOOL_VISIBLE``, so it counts tool calls as the model made them), a lifecycle
contributor folds each task's counts into an app-store aggregate when the task stops,
and ``GET /api/ext/costs/totals`` reports the aggregate::

    plugins:
      - name: costs
        use: costs
        config: {input_per_million: 0.15, output_per_million: 0.60, currency: USD}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_extension_api import ExtensionRegistry, extension

from .accounting import CostTotals, Prices, TaskCosts
from .contributions import CostLedger, CostMiddlewares, StoreHandle
from .middleware import TokenCounter, ToolCallCounter
from .routes import make_router

__all__ = [
    "CostLedger",
    "CostMiddlewares",
    "CostTotals",
    "Prices",
    "StoreHandle",
    "TaskCosts",
    "TokenCounter",
    "ToolCallCounter",
    "install",
    "make_router",
]


@extension(api="0.2.0", name="costs")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    """Register the counting middlewares, the folding lifecycle hook and the totals router."""
    prices = Prices.from_config(config)
    handle = StoreHandle()
    registry.middlewares(CostMiddlewares(prices))
    registry.task_lifecycle(CostLedger())
    registry.service(handle)
    registry.routers([make_router(handle, prices)])
