"""An extension that blocks the event loop, or leaves a thread running, where it is told to.

``config = {"where": <place>, "seconds": N}``; places: ``on_task_start``, ``wrap`` (a
middleware's model call), ``service_start``, ``service_stop`` (each blocks with
``time.sleep``, the way a synchronous client call would) and ``thread`` (the service starts
a *non-daemon* thread at start and never stops it). Everything else it registers behaves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import MiddlewarePlacement, Placement, extension

ATTRIBUTION = "blocking_ext:install"


class SleepyMiddleware(AgentMiddleware):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        time.sleep(self.seconds)  # noqa: ASYNC251 - blocking the loop is what this extension is for
        return await handler(request)


class Contributor:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        if ctx.agent_name not in (None, "lead"):
            return []
        return [MiddlewarePlacement(SleepyMiddleware(self.seconds), Placement.STANDARD)]


class Lifecycle:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        time.sleep(self.seconds)  # noqa: ASYNC251


def _forever() -> None:
    while True:
        time.sleep(0.1)


class Service:
    def __init__(self, where: str, seconds: float) -> None:
        self.where, self.seconds = where, seconds

    async def start(self, deps: Any) -> None:
        if self.where == "service_start":
            time.sleep(self.seconds)  # noqa: ASYNC251
        if self.where == "thread":
            threading.Thread(target=_forever, name="blocking-ext-poller", daemon=False).start()

    async def stop(self) -> None:
        if self.where == "service_stop":
            time.sleep(self.seconds)  # noqa: ASYNC251


@extension(api="0.2.1")
def install(registry: Any, config: Mapping[str, Any]) -> None:
    where, seconds = str(config.get("where", "")), float(config.get("seconds", 0))
    if where == "on_task_start":
        registry.task_lifecycle(Lifecycle(seconds))
    if where == "wrap":
        registry.middlewares(Contributor(seconds))
    registry.service(Service(where, seconds))
