"""Extensions for the operator-route tests, installed by the real loader as ``use: "module:attr"``.

A module of its own, importing no ``conftest``: the loader imports it under its dotted name
(``gateway.operator_fixtures``), which must not depend on which conftest pytest loaded last.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import MiddlewarePlacement, Placement


class Timer:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        return None

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        return None


class Passing(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


class Contributor:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        return [MiddlewarePlacement(Passing(), Placement.STANDARD)]


class BrokenService:
    async def start(self, deps: Any) -> None:
        raise RuntimeError("the queue is down")

    async def stop(self) -> None:
        return None


def install_metered(registry: Any, config: Mapping[str, Any]) -> None:
    registry.task_lifecycle(Timer())
    registry.middlewares(Contributor())


def install_broken_service(registry: Any, config: Mapping[str, Any]) -> None:
    registry.service(BrokenService())


def install_raises(registry: Any, config: Mapping[str, Any]) -> None:
    raise ValueError("bad threshold")
