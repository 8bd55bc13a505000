"""A tiny extension used to test the author kit: it records what the host did to it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from threading import Lock
from typing import Any

from fastapi import APIRouter

from deerflow_extension_api import (
    ExtensionData,
    ExtensionRegistry,
    ExtensionRuntimeDeps,
    TaskInfo,
    TaskOutcome,
    extension,
)


@dataclass
class Events:
    items: list[tuple[str, str, str]] = field(default_factory=list)
    _lock: Lock = field(default_factory=Lock, repr=False)

    def add(self, what: str, kind: str, detail: str) -> None:
        with self._lock:
            self.items.append((what, kind, detail))

    def snapshot(self) -> list[tuple[str, str, str]]:
        with self._lock:
            return list(self.items)


class Recorder:
    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        app_store.get_or_init(Events, Events).add("start", info.kind, info.task_id)

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        app_store.get_or_init(Events, Events).add("stop", info.kind, outcome.value)


class Lifetime:
    def __init__(self) -> None:
        self.deps: ExtensionRuntimeDeps | None = None
        self.stopped = False

    async def start(self, deps: ExtensionRuntimeDeps) -> None:
        self.deps = deps

    async def stop(self) -> None:
        self.stopped = True


LIFETIMES: list[Lifetime] = []


@extension(api="0.2.0", name="kit")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    lifetime = Lifetime()
    LIFETIMES.append(lifetime)
    router = APIRouter(prefix="/api/ext/kit")

    @router.get("/hello")
    async def hello() -> dict[str, Any]:
        return {"greeting": config.get("greeting", "hello"), "started": lifetime.deps is not None}

    registry.task_lifecycle(Recorder())
    registry.service(lifetime)
    registry.routers([router])
