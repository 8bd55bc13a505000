"""Extensions the kit's property checks must catch — order-dependent ones (``echo`` after
``tally``, ``follower`` after ``marker``), one that breaks next to a neighbour that spends the
budget (``fragile``), one slower than the budget (``slow``) — and one that is none of these
(``sturdy``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from threading import Lock
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import (
    AgentBuildContext,
    ExtensionData,
    ExtensionRegistry,
    MiddlewarePlacement,
    Placement,
    TaskInfo,
    TaskOutcome,
    extension,
)


@dataclass
class Stops:
    """How many tasks the ``tally`` extension has seen stop."""

    count: int = 0
    _lock: Lock = field(default_factory=Lock, repr=False)

    def add(self) -> int:
        with self._lock:
            self.count += 1
            return self.count


@dataclass
class Seen:
    """What the ``echo`` extension read from ``Stops`` when the last task stopped."""

    count: int


class _OnStop:
    """A lifecycle contributor that only acts when a task stops."""

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        return None


class _Tally(_OnStop):
    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        app_store.get_or_init(Stops, Stops).add()


class _Echo(_OnStop):
    """Reads another extension's value in its own hook: right only if it runs after ``tally``."""

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        stops = app_store.get(Stops)
        app_store.set(Seen(stops.count if stops is not None else 0))


@dataclass
class Clock:
    started: float


@dataclass
class Timed:
    """How many tasks the ``fragile`` / ``sturdy`` extensions timed."""

    count: int = 0
    _lock: Lock = field(default_factory=Lock, repr=False)

    def add(self) -> None:
        with self._lock:
            self.count += 1


class _Fragile:
    """Assumes start implies stop — the spec's pitfall: a neighbour that spends the start
    budget makes its ``on_task_stop`` raise and the task goes uncounted."""

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        task_store.set(Clock(time.monotonic()))

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        clock = task_store.get(Clock)
        assert clock is not None, "on_task_start did not run"
        app_store.get_or_init(Timed, Timed).add()


class _Sturdy(_Fragile):
    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        app_store.get_or_init(Timed, Timed).add()  # a missing clock only means an unknown duration


def _lifecycle(name: str, contributor: type[Any]) -> Any:
    """An install registering one *contributor*, importable as ``testing.order_extensions:<name>``."""

    @extension(api="0.2.0", name=name)
    def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
        registry.task_lifecycle(contributor())

    install.__qualname__ = install.__name__ = name
    return install


tally = _lifecycle("tally", _Tally)
echo = _lifecycle("echo", _Echo)
fragile = _lifecycle("fragile", _Fragile)
sturdy = _lifecycle("sturdy", _Sturdy)


@dataclass
class Marker:
    """Set by ``marker``'s contributor: proof that it contributed before whoever reads it."""


class Tracker(AgentMiddleware):  # type: ignore[type-arg]
    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)


class _Marks:
    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Any:
        app_store.set(Marker())
        return (MiddlewarePlacement(Tracker(), Placement.STANDARD),)


class _FollowsMarks:
    """Contributes a second middleware only once ``marker`` contributed: its stack depends on order."""

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Any:
        placements = [MiddlewarePlacement(Tracker(), Placement.MODEL_LOGICAL)]
        if app_store.get(Marker) is not None:
            placements.append(MiddlewarePlacement(Tracker(), Placement.TOOL_RAW))
        return placements


@extension(api="0.2.0", name="marker")
def marker(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    registry.middlewares(_Marks())


@extension(api="0.2.0", name="follower")
def follower(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    registry.middlewares(_FollowsMarks())


class _Slow:
    """Lifecycle hooks slower than the check's budget: cut where the spec says only a hang is."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        await asyncio.sleep(self.seconds)

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        await asyncio.sleep(self.seconds)


@extension(api="0.2.0", name="slow")
def slow(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    registry.task_lifecycle(_Slow(float(config.get("seconds", 1.0))))
