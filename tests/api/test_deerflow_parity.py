"""What an extension written for DeerFlow's contract relies on, checked against ours.

DeerFlow's extensions are written against its ``deerflow_extension_api``; ours must import and
run them unchanged once their marker and pin say 0.2. These are the promises such code leans
on that the rest of ``tests/api`` does not already pin down: every protocol method callable
on any object (a default body, not an abstract stub), the optional-field defaults, the
public names, and a store usable from an ``init`` running on another thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import deerflow_extension_api as api

PROTOCOLS = [
    api.ExtensionRegistry,
    api.ExtensionService,
    api.MiddlewareContributor,
    api.TaskLifecycleContributor,
    api.SystemModelCallObserver,
    api.AgentAssemblyObserver,
    api.ContextCompactionObserver,
]

STORE = api.ExtensionData("task-1")
ARGUMENTS: dict[str, object] = {
    "app_store": api.ExtensionData("app"),
    "task_store": STORE,
    "info": api.TaskInfo("task-1", "run-1", "thread-1", "lead"),
    "outcome": api.TaskOutcome.COMPLETED,
    "kind": api.SystemOperationKind.GOAL,
    "request": api.SystemModelRequest(messages=("prompt",), model_name="system-model"),
    "result": api.SystemModelResult(error=RuntimeError("provider failed"), duration_ms=2.0),
    "ctx": api.AgentBuildContext(api.AgentScope.LEAD),
    "deps": api.ExtensionRuntimeDeps(),
    "descriptor": api.AgentAssemblyDescriptor("ns", "a", None, "m", {}, False, None, "h", (), (), (), (), {}),
    "event": api.CompactionEvent("summarization", "1", (), "o", 0, 0),
    "contributor": object(),
    "observer": object(),
    "service": object(),
    "routers": (),
    "contribution": object(),
}

# A method whose "nothing" is another value: ``plugin`` answers "this host takes no plugins".
EMPTY_DEFAULTS: dict[str, object] = {"plugin": False}


class Bare:
    """Implements nothing: the protocol's own bodies must do the work."""


def _methods(protocol: type) -> list[tuple[str, Callable[..., Any]]]:
    return [
        (name, member)
        for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.isfunction(member)
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_every_protocol_method_has_a_body_that_returns_an_empty_default(protocol: type) -> None:
    """Called on an object that implements nothing, each method returns ``None`` (or ``()`` for
    a contribution list, ``False`` for ``plugin``): adding a method in a later release never
    breaks old code."""
    methods = _methods(protocol)
    assert methods, f"{protocol.__name__} declares no methods"
    for name, method in methods:
        parameters = list(inspect.signature(method).parameters)[1:]
        returned = method(Bare(), *(ARGUMENTS[p] for p in parameters))
        if inspect.iscoroutine(returned):
            returned = asyncio.run(returned)
        if name in EMPTY_DEFAULTS:
            assert returned is EMPTY_DEFAULTS[name], f"{protocol.__name__}.{name} returned {returned!r}"
        else:
            assert returned in (None, ()), f"{protocol.__name__}.{name} returned {returned!r}"


@pytest.mark.parametrize(
    "cls",
    [api.HostPolicySnapshot, api.ExtensionRuntimeDeps, api.SystemModelRequest, api.SystemModelResult],
    ids=lambda c: c.__name__,
)
def test_host_built_values_need_no_arguments(cls: type) -> None:
    value = cls()
    assert all(getattr(value, f.name) == _default(f) for f in dataclasses.fields(value))


def _default(field: dataclasses.Field[Any]) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    assert field.default_factory is not dataclasses.MISSING
    return field.default_factory()


def test_task_info_needs_only_its_identity() -> None:
    info = api.TaskInfo(task_id="t", run_id="r", thread_id="th", kind="lead")
    assert (info.parent_task_id, info.agent_name, info.resumed) == (None, None, False)


def test_every_public_dataclass_declares_itself_frozen() -> None:
    for name in api.__all__:
        value = getattr(api, name)
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            assert value.__dataclass_params__.frozen, name  # type: ignore[attr-defined]


def test_services_and_routers_are_registered_through_the_registry() -> None:
    assert {"ExtensionRuntimeDeps", "ExtensionService"} <= set(api.__all__)
    assert callable(api.ExtensionRegistry.service) and callable(api.ExtensionRegistry.routers)
    assert not hasattr(api, "RouterContributor")  # routers are plain APIRouters, not a protocol


def test_the_contracts_enumerations_compare_as_their_strings() -> None:
    for enumeration in (api.Placement, api.TaskOutcome, api.SystemOperationKind):
        for member in enumeration:
            assert member == member.value and isinstance(member, str)
    assert {o.value for o in api.TaskOutcome} == {"completed", "aborted", "failed"}
    assert {k.value for k in api.SystemOperationKind} == {"goal", "memory", "title", "summarization"}


def test_the_version_is_0_2_6() -> None:
    assert api.API_VERSION == "0.2.6"


@dataclass
class Counter:
    value: int = 0


@dataclass
class Label:
    text: str = ""


def test_an_init_on_another_thread_may_write_other_values_to_the_same_store() -> None:
    store = api.ExtensionData("task-1")
    made: list[Counter] = []

    def init() -> Counter:
        store.set(Label("nested"))
        return Counter(2)

    worker = threading.Thread(target=lambda: made.append(store.get_or_init(Counter, init)), daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "get_or_init deadlocked on a nested write"
    assert made == [Counter(2)] and store.get(Label) == Label("nested")


def test_stores_share_nothing() -> None:
    first, second = api.ExtensionData("task-a"), api.ExtensionData("task-b")
    first.set(Counter(1))
    assert second.get(Counter) is None
    assert (first.scope_id, second.scope_id) == ("task-a", "task-b")


class FirstReleaseRegistry:
    """A registry double written against the contract's first release (DeerFlow's 0.1)."""

    def middlewares(self, contributor: Any) -> None:
        return None

    def task_lifecycle(self, contributor: Any) -> None:
        return None

    def system_model_observer(self, observer: Any) -> None:
        return None

    def service(self, service: Any) -> None:
        return None

    def routers(self, routers: Any) -> None:
        return None


class Incomplete:
    def middlewares(self, contributor: Any) -> None:
        return None


def test_runtime_registry_checks_stay_additive() -> None:
    """0.2 added two registration methods; a registry from before them is still a registry."""
    assert isinstance(FirstReleaseRegistry(), api.ExtensionRegistry)
    assert issubclass(FirstReleaseRegistry, api.ExtensionRegistry)
    assert not isinstance(Incomplete(), api.ExtensionRegistry)
    assert not isinstance(object(), api.ExtensionRegistry)
    assert {"agent_assembly_observer", "context_compaction_observer"} <= set(vars(api.ExtensionRegistry))
