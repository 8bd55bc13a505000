"""A spend alarm planted next to the costs example: right only when it is listed after it.

It reads the costs extension's running totals in its own ``on_task_stop``. Listed after
``costs``, it sees each task folded in; listed before, it sees the totals one task late —
the order dependence ``extensions check`` must find and print as a ``plugins:`` list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deerflow_costs import CostTotals, StoreHandle
from fastapi import APIRouter

from deerflow_extension_api import ExtensionData, ExtensionRegistry, TaskInfo, TaskOutcome, extension


@dataclass(frozen=True)
class SpendSeen:
    tasks: int
    total_tokens: int


class SpendAlarm:
    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        return None

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        totals = (app_store.get(CostTotals) or CostTotals()).snapshot()
        app_store.set(SpendSeen(totals["tasks"], totals["total_tokens"]))


@extension(api="0.2.0", name="spend")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    handle = StoreHandle()
    router = APIRouter(prefix="/api/ext/spend")

    @router.get("/seen")
    async def seen() -> dict[str, int]:
        value = handle.app_store.get(SpendSeen) if handle.app_store is not None else None
        return {"tasks": value.tasks, "total_tokens": value.total_tokens} if value else {}

    registry.task_lifecycle(SpendAlarm())
    registry.service(handle)
    registry.routers([router])
