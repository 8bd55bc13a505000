"""deerflow-tally on its own (a registry double, the contributions called directly) and in a
real host (the ``deerflow_host`` fixture of deerflow-ext's pytest plugin)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import deerflow_tally
import pytest
from deerflow_tally import StatsService, SystemCallCounter, Tally, TaskCounts, TaskFolder, ToolCounting, stats_router
from fastapi import FastAPI
from fastapi.testclient import TestClient

from deerflow_extension_api import (
    EXTENSION_TASK_STORE_KEY,
    AgentBuildContext,
    AgentScope,
    ExtensionData,
    ExtensionRegistry,
    ExtensionRuntimeDeps,
    HostPolicySnapshot,
    Placement,
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
    TaskInfo,
    TaskOutcome,
)

LEAD = TaskInfo("t1", "r1", "th1", "lead")
SUB = TaskInfo("t2", "r1", "th1", "subagent", parent_task_id="r1")


class Recorder(ExtensionRegistry):
    """Records what install() registers, by registry method."""

    def __init__(self) -> None:
        self.seen: dict[str, list[Any]] = {}

    def _note(self, method: str, value: Any) -> None:
        self.seen.setdefault(method, []).append(value)

    def middlewares(self, contributor: Any) -> None:
        self._note("middlewares", contributor)

    def task_lifecycle(self, contributor: Any) -> None:
        self._note("task_lifecycle", contributor)

    def system_model_observer(self, observer: Any) -> None:
        self._note("system_model_observer", observer)

    def service(self, service: Any) -> None:
        self._note("service", service)

    def routers(self, routers: Sequence[Any]) -> None:
        self.seen.setdefault("routers", []).extend(routers)


def test_install_registers_each_contribution_kind_once_and_is_marked_for_0_2() -> None:
    registry = Recorder()
    deerflow_tally.install(registry, {})
    assert {method: len(values) for method, values in registry.seen.items()} == {
        "middlewares": 1,
        "task_lifecycle": 1,
        "system_model_observer": 1,
        "service": 1,
        "routers": 1,
    }
    assert [route.path for route in registry.seen["routers"][0].routes] == ["/api/ext/tally/stats"]
    assert deerflow_tally.install.__deerflow_api__ == "0.2"  # type: ignore[attr-defined]
    assert deerflow_tally.install.__deerflow_name__ == "tally"  # type: ignore[attr-defined]


def _tool_request(store: ExtensionData | None, name: str) -> Any:
    context = {EXTENSION_TASK_STORE_KEY: store} if store is not None else {}
    return SimpleNamespace(runtime=SimpleNamespace(context=context), tool_call={"name": name, "args": {}, "id": "c"})


def test_the_contributions_fold_tasks_tools_and_system_calls_into_one_tally() -> None:
    app, lead_store, sub_store = ExtensionData("app"), ExtensionData("t1"), ExtensionData("t2")
    (placement,) = ToolCounting().contribute_middlewares(app, AgentBuildContext(AgentScope.LEAD))
    assert placement.placement is Placement.TOOL_VISIBLE and placement.scope is AgentScope.BOTH
    counter, folder, observer = placement.middleware, TaskFolder(), SystemCallCounter()

    async def scenario() -> None:
        await folder.on_task_start(app, lead_store, LEAD)
        await folder.on_task_start(app, sub_store, SUB)
        assert counter.wrap_tool_call(_tool_request(lead_store, "task"), lambda r: "sync result") == "sync result"

        async def handler(request: Any) -> str:
            return "async result"

        assert await counter.awrap_tool_call(_tool_request(sub_store, "calculator"), handler) == "async result"
        assert await counter.awrap_tool_call(_tool_request(None, "untracked"), handler) == "async result"
        await observer.on_system_model_call(
            app, lead_store, SystemOperationKind.TITLE, SystemModelRequest("p"), SystemModelResult(response="t")
        )
        await observer.on_system_model_call(
            app, lead_store, SystemOperationKind.GOAL, SystemModelRequest("p"), SystemModelResult(error=OSError())
        )
        await folder.on_task_stop(app, sub_store, SUB, TaskOutcome.FAILED)
        await folder.on_task_stop(app, lead_store, LEAD, TaskOutcome.COMPLETED)
        await folder.on_task_stop(app, ExtensionData("t3"), LEAD, TaskOutcome.ABORTED)  # its start was skipped

    asyncio.run(scenario())
    snapshot = app.get_or_init(Tally, Tally).snapshot()
    assert snapshot["tasks"] == {"completed": 1, "aborted": 1, "failed": 1}
    assert snapshot["tasks_by_kind"]["subagent"] == {"completed": 0, "aborted": 0, "failed": 1}
    assert (snapshot["tool_calls"], snapshot["tool_calls_by_name"]) == (2, {"task": 1, "calculator": 1})
    assert snapshot["system_model_calls"] == {
        "goal": {"calls": 1, "errors": 1},
        "memory": {"calls": 0, "errors": 0},
        "title": {"calls": 1, "errors": 0},
        "summarization": {"calls": 0, "errors": 0},
    }
    assert lead_store.get(TaskCounts) is None  # folded and gone with the task


def test_the_route_serves_only_while_the_service_runs() -> None:
    service = StatsService()
    app = FastAPI()
    app.include_router(stats_router(service))
    store = ExtensionData("app")
    with TestClient(app) as client:
        assert client.get("/api/ext/tally/stats").status_code == 503
        deps = ExtensionRuntimeDeps(app_store=store, policy=HostPolicySnapshot(max_subagents_per_run=4))
        asyncio.run(service.start(deps))
        body = client.get("/api/ext/tally/stats").json()
        asyncio.run(service.stop())
        assert client.get("/api/ext/tally/stats").status_code == 503
    assert body["scope_id"] == "app" and body["max_subagents_per_run"] == 4 and body["database"] is False
    assert body["tasks"] == {"completed": 0, "aborted": 0, "failed": 0}


# -- in a real host ------------------------------------------------------------------------------
@pytest.fixture
def host(deerflow_host: Any) -> Any:
    return deerflow_host(
        "tally",
        app_config={"summarization": {"trigger_messages": 4, "keep_messages": 2}, "memory": {"debounce_seconds": 0}},
    )


def _stats(host: Any) -> dict[str, Any]:
    response = host.client.get("/api/ext/tally/stats")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_a_real_host_counts_tasks_tool_calls_and_every_system_call_kind(host: Any) -> None:
    from deerflow_ext.testing import wait_for

    first = host.run("delegate: summarise the plan")
    assert first.outcome == "completed"
    again = host.run("and what next?", thread_id=first.thread_id, goal="after 1 turns")
    assert again.outcome == "completed"

    def every_kind_seen() -> dict[str, Any] | None:
        stats = _stats(host)
        return stats if all(v["calls"] for v in stats["system_model_calls"].values()) else None

    stats = wait_for(every_kind_seen, timeout=30)
    assert stats["tasks"]["completed"] >= 3  # two lead runs and the subagent
    assert stats["tasks_by_kind"]["subagent"]["completed"] == 1
    assert stats["tool_calls_by_name"].get("task") == 1
    assert not host.diagnostics
