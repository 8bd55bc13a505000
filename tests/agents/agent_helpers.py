"""Helpers for the agent-host tests: a recording extension of every kind, hosts, clients."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware
from langgraph.checkpoint.memory import InMemorySaver

from deerflow_ext.agents.host import AgentHost
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.snapshot import (
    Contribution,
    LoadedExtensions,
    get_loaded_extensions,
    set_loaded_extensions,
)
from deerflow_ext.subagents.sandbox import sandbox_pool
from deerflow_extension_api import (
    AgentAssemblyDescriptor,
    AgentBuildContext,
    CompactionEvent,
    ExtensionData,
    MiddlewarePlacement,
    Placement,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
    TaskInfo,
    TaskOutcome,
)

EXTENSION = "recording_ext:install"


@dataclass
class Recorder:
    """Thread-safe event log shared by every recording contributor of one extension."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    infos: list[TaskInfo] = field(default_factory=list)
    descriptors: list[AgentAssemblyDescriptor] = field(default_factory=list)
    compactions: list[CompactionEvent] = field(default_factory=list)
    system_calls: list[tuple[SystemOperationKind, SystemModelRequest, SystemModelResult, ExtensionData | None]] = field(
        default_factory=list
    )
    steps: list[dict[str, Any]] = field(default_factory=list)
    stop_owners: list[tuple[str, ...]] = field(default_factory=list)
    task_stores: dict[str, ExtensionData] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, *event: Any) -> None:
        with self._lock:
            self.events.append(event)

    def sequence(self, *, without: tuple[str, ...] = ("compaction",)) -> list[tuple[Any, ...]]:
        with self._lock:
            return [e for e in self.events if e[0] not in without]


class RecordingLifecycle:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def on_task_start(self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo) -> None:
        self.recorder.infos.append(info)
        self.recorder.task_stores[info.task_id] = task_store
        self.recorder.add("start", info.kind, info.task_id)

    async def on_task_stop(
        self, app_store: ExtensionData, task_store: ExtensionData, info: TaskInfo, outcome: TaskOutcome
    ) -> None:
        self.recorder.stop_owners.append(sandbox_pool.owners)
        self.recorder.add("stop", info.kind, info.task_id, outcome.value)


class RecordingSystemObserver:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def on_system_model_call(
        self,
        app_store: ExtensionData,
        task_store: ExtensionData,
        kind: SystemOperationKind,
        request: SystemModelRequest,
        result: SystemModelResult,
    ) -> None:
        self.recorder.system_calls.append((kind, request, result, task_store))
        self.recorder.add("system", kind.value)


class RecordingAssemblyObserver:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def on_agent_assembled(self, app_store: ExtensionData, descriptor: AgentAssemblyDescriptor) -> None:
        self.recorder.descriptors.append(descriptor)
        self.recorder.add("assembled", descriptor.agent_name)


class RecordingCompactionObserver:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def on_context_compacted(
        self, app_store: ExtensionData, task_store: ExtensionData, event: CompactionEvent
    ) -> None:
        self.recorder.compactions.append(event)
        self.recorder.add("compaction", event.compacted_message_count)


class StepRecorderMiddleware(AgentMiddleware):
    """Records where each agent invocation runs: thread, loop, agent."""

    def __init__(self, recorder: Recorder, scope: str) -> None:
        super().__init__()
        self.recorder = recorder
        self.scope = scope

    async def abefore_agent(self, state: Any, runtime: Any) -> None:
        self.recorder.steps.append(
            {
                "scope": self.scope,
                "thread": threading.get_ident(),
                "loop": id(asyncio.get_running_loop()),
                "agent": (runtime.context or {}).get("agent_name"),
            }
        )


class RecordingMiddlewareContributor:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> list[MiddlewarePlacement]:
        self.recorder.add("contribute", ctx.agent_name)
        return [MiddlewarePlacement(StepRecorderMiddleware(self.recorder, ctx.scope.name or ""), Placement.STANDARD)]


def _contribution(contributor: Any, n: int) -> Contribution[Any]:
    return Contribution(
        extension=EXTENSION,
        label="recording",
        position=0,
        plugin_name=f"0:recording_ext#{n}",
        contributor=contributor,
    )


def recording_extensions(recorder: Recorder, *, kinds: tuple[str, ...] = ("all",)) -> LoadedExtensions:
    """A ``LoadedExtensions`` with one recording contributor of each requested kind."""
    want = set(kinds)

    def on(kind: str) -> bool:
        return "all" in want or kind in want

    return LoadedExtensions(
        middlewares=(_contribution(RecordingMiddlewareContributor(recorder), 0),) if on("middleware") else (),
        task_lifecycle=(_contribution(RecordingLifecycle(recorder), 1),) if on("lifecycle") else (),
        system_model_observers=(_contribution(RecordingSystemObserver(recorder), 2),) if on("system") else (),
        assembly_observers=(_contribution(RecordingAssemblyObserver(recorder), 3),) if on("assembly") else (),
        compaction_observers=(_contribution(RecordingCompactionObserver(recorder), 4),) if on("compaction") else (),
        loaded=(EXTENSION,),
        total=1,
    )


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def rec_ext(recorder: Recorder) -> LoadedExtensions:
    return recording_extensions(recorder)


def make_config(**overrides: Any) -> AppConfig:
    """Config for tests: memory debounced far out (extraction only on flush), quick subagents."""
    data: dict[str, Any] = {"memory": {"enabled": True, "debounce_seconds": 30}}
    data.update(overrides)
    return AppConfig.model_validate(data)


def make_host(config: AppConfig | None = None, **kwargs: Any) -> AgentHost:
    return AgentHost(config or make_config(), checkpointer=InMemorySaver(), **kwargs)


@pytest.fixture
def restore_process_extensions() -> Iterator[None]:
    previous = get_loaded_extensions()
    yield
    set_loaded_extensions(previous)


@pytest.fixture
async def notify_loop() -> Any:
    """Register the test's loop as the notification loop (as the Gateway would)."""
    from deerflow_ext.extensions.notifications.notification_loop import notification_loop

    notification_loop.register(asyncio.get_running_loop())
    yield notification_loop
    await notification_loop.drain(2.0)
    notification_loop.reset()
