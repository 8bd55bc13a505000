"""Stores: the task store exists only for task-scoped contributions; detached stores are fresh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.extensions.contract.stores import DETACHED_SCOPE_ID, detached_store, store_or_detached
from deerflow_extension_api import ExtensionData


class Middleware:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[Any]:
        return []


class Lifecycle:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        return None


class SystemObserver:
    async def on_system_model_call(self, app_store: Any, task_store: Any, kind: Any, request: Any, result: Any) -> None:
        return None


class CompactionObserver:
    async def on_context_compacted(self, app_store: Any, task_store: Any, event: Any) -> None:
        return None


class AssemblyObserver:
    def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
        return None


class Service:
    async def start(self, deps: Any) -> None:
        return None

    async def stop(self) -> None:
        return None


class Router:
    routes: list[Any] = []


REGISTRATIONS: dict[str, tuple[Callable[[HostRegistry], None], bool]] = {
    "middlewares": (lambda r: r.middlewares(Middleware()), True),
    "task_lifecycle": (lambda r: r.task_lifecycle(Lifecycle()), True),
    "system_model_observer": (lambda r: r.system_model_observer(SystemObserver()), True),
    "context_compaction_observer": (lambda r: r.context_compaction_observer(CompactionObserver()), True),
    "agent_assembly_observer": (lambda r: r.agent_assembly_observer(AssemblyObserver()), False),
    "service": (lambda r: r.service(Service()), False),
    "routers": (lambda r: r.routers([Router()]), False),
}


def loaded(*kinds: str) -> LoadedExtensions:
    registry = HostRegistry()
    registry.begin(0, "x", "x:install")
    for kind in kinds:
        REGISTRATIONS[kind][0](registry)
    registry.end()
    return registry.freeze(total=1)


@pytest.mark.parametrize("kind", sorted(REGISTRATIONS))
def test_a_task_store_exists_only_for_the_four_task_scoped_kinds(kind: str) -> None:
    ext = loaded(kind)
    wanted = REGISTRATIONS[kind][1]
    assert ext.needs_task_store is wanted
    store = ext.new_task_store("7f3c")
    if wanted:
        assert isinstance(store, ExtensionData) and store.scope_id == "7f3c"
        assert ext.new_task_store("7f3c") is not store, "one store per task"
    else:
        assert store is None


def test_services_routers_and_assembly_observers_together_cost_a_run_no_store() -> None:
    ext = loaded("service", "routers", "agent_assembly_observer")
    assert ext.new_task_store("t") is None
    assert LoadedExtensions().new_task_store("t") is None


def test_the_app_store_is_one_per_snapshot_shared_by_every_extension() -> None:
    ext = loaded("task_lifecycle", "service")
    assert ext.app_store.scope_id == "app"
    assert ext.app_store is ext.app_store


def test_detached_stores_are_fresh_each_time() -> None:
    first, second = detached_store(), detached_store()
    assert first.scope_id == second.scope_id == DETACHED_SCOPE_ID == "detached"
    assert first is not second


def test_store_or_detached_prefers_the_live_task_store() -> None:
    live = ExtensionData("7f3c")
    assert store_or_detached(live) is live
    fallback = store_or_detached(None)
    assert fallback.scope_id == "detached" and store_or_detached(None) is not fallback
