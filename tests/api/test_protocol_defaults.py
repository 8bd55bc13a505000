from __future__ import annotations

from typing import Any

import pytest

import deerflow_extension_api as api

STORE = api.ExtensionData("s")
INFO = api.TaskInfo("t", "r", "th", "lead")


class Lifecycle(api.TaskLifecycleContributor):
    pass


class SystemObserver(api.SystemModelCallObserver):
    pass


class Assembly(api.AgentAssemblyObserver):
    pass


class Compaction(api.ContextCompactionObserver):
    pass


class Middlewares(api.MiddlewareContributor):
    pass


class Service(api.ExtensionService):
    pass


class Registry(api.ExtensionRegistry):
    pass


@pytest.mark.parametrize(
    ("cls", "protocol"),
    [
        (Lifecycle, api.TaskLifecycleContributor),
        (SystemObserver, api.SystemModelCallObserver),
        (Assembly, api.AgentAssemblyObserver),
        (Compaction, api.ContextCompactionObserver),
        (Middlewares, api.MiddlewareContributor),
        (Service, api.ExtensionService),
        (Registry, api.ExtensionRegistry),
    ],
)
def test_empty_subclass_isinstance_checks(cls: type, protocol: type) -> None:
    assert isinstance(cls(), protocol)
    assert not isinstance(object(), protocol)


async def test_async_defaults_return_none() -> None:
    assert await Lifecycle().on_task_start(STORE, STORE, INFO) is None
    assert await Lifecycle().on_task_stop(STORE, STORE, INFO, api.TaskOutcome.COMPLETED) is None
    request, result = api.SystemModelRequest("p"), api.SystemModelResult()
    assert (
        await SystemObserver().on_system_model_call(STORE, STORE, api.SystemOperationKind.TITLE, request, result)
        is None
    )
    event = api.CompactionEvent("summarization", "1", (), "o", 0, 0)
    assert await Compaction().on_context_compacted(STORE, STORE, event) is None
    assert await Service().start(api.ExtensionRuntimeDeps()) is None
    assert await Service().stop() is None


def test_sync_defaults() -> None:
    descriptor = api.AgentAssemblyDescriptor("ns", "a", None, "m", {}, False, None, "h", (), (), (), (), {})
    assert Assembly().on_agent_assembled(STORE, descriptor) is None
    assert tuple(Middlewares().contribute_middlewares(STORE, api.AgentBuildContext(api.AgentScope.LEAD))) == ()


def test_duck_typed_contributor_isinstance_checks() -> None:
    class Timer:
        async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
            return None

        async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
            return None

    assert isinstance(Timer(), api.TaskLifecycleContributor)


@pytest.mark.parametrize(
    ("method", "argument"),
    [
        ("middlewares", Middlewares()),
        ("task_lifecycle", Lifecycle()),
        ("system_model_observer", SystemObserver()),
        ("agent_assembly_observer", Assembly()),
        ("context_compaction_observer", Compaction()),
        ("service", Service()),
        ("routers", []),
    ],
)
def test_registry_defaults_return_none(method: str, argument: object) -> None:
    # As in DeerFlow: the defaults keep a registry double that predates a method working.
    # The host's registry does not inherit them (tests/extensions/test_registry.py: an
    # unknown registration is an AttributeError that fails the install).
    assert getattr(Registry(), method)(argument) is None
