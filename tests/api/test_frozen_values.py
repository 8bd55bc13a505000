from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import deerflow_extension_api as api

INSTANCES: list[Any] = [
    api.TaskInfo("t", "r", "th", "lead"),
    api.SystemModelRequest(["m"]),
    api.SystemModelResult(),
    api.AgentBuildContext(api.AgentScope.LEAD),
    api.MiddlewarePlacement(object(), api.Placement.STANDARD),
    api.HostPolicySnapshot(),
    api.ExtensionRuntimeDeps(),
    api.ToolDescriptor("n", "d", "s", "builtin"),
    api.MiddlewareDescriptor("n", "m"),
    api.AgentAssemblyDescriptor("ns", "a", None, "m", {}, False, None, "h", (), (), (), (), {}),
    api.CompactionEvent("summarization", "1", ("h1",), "out", 1, 0),
]


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: type(i).__name__)
def test_every_dataclass_is_frozen(instance: Any) -> None:
    assert dataclasses.is_dataclass(instance)
    first = dataclasses.fields(instance)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, first, None)


def test_every_public_dataclass_is_covered() -> None:
    public = {
        name
        for name in api.__all__
        if isinstance(getattr(api, name), type) and dataclasses.is_dataclass(getattr(api, name))
    }
    assert public == {type(i).__name__ for i in INSTANCES}


def test_task_info_defaults() -> None:
    info = api.TaskInfo("t", "r", "", "subagent")
    assert (info.parent_task_id, info.agent_name, info.resumed) == (None, None, False)
    assert api.TaskInfo.__annotations__["thread_id"] == "str"  # "" for a subagent without a thread


def test_task_outcome_values() -> None:
    assert [o.value for o in api.TaskOutcome] == ["completed", "aborted", "failed"]
    assert api.TaskOutcome.FAILED == "failed"


def test_placement_and_scope() -> None:
    assert [p.name for p in api.Placement] == [
        "MODEL_LOGICAL",
        "MODEL_PHYSICAL",
        "TOOL_VISIBLE",
        "TOOL_RAW",
        "STANDARD",
    ]
    assert [p.value for p in api.Placement] == [
        "model_logical",
        "model_physical",
        "tool_visible",
        "tool_raw",
        "standard",
    ]
    assert api.Placement.TOOL_VISIBLE == "tool_visible"
    assert api.Placement("tool_raw") is api.Placement.TOOL_RAW
    assert f"{api.Placement.STANDARD}" == "standard"
    assert api.AgentScope.BOTH == api.AgentScope.LEAD | api.AgentScope.SUBAGENT
    assert api.AgentScope.LEAD in api.AgentScope.BOTH
    placement = api.MiddlewarePlacement("mw", api.Placement.TOOL_RAW)
    assert (placement.scope, placement.order) == (api.AgentScope.BOTH, 0)


def test_build_context_and_deps_defaults() -> None:
    ctx = api.AgentBuildContext(api.AgentScope.SUBAGENT)
    assert (ctx.agent_name, ctx.model_name, ctx.policy) == (None, None, api.HostPolicySnapshot())
    deps = api.ExtensionRuntimeDeps()
    assert (deps.app_store, deps.policy, deps.session_factory) == (None, api.HostPolicySnapshot(), None)


def test_policy_defaults_and_disabled_budget_invariant() -> None:
    policy = api.HostPolicySnapshot()
    assert policy.token_budget_enabled is False
    assert policy.max_subagents_per_run is None
    assert api.HostPolicySnapshot(max_subagents_per_run=2).max_subagents_per_run == 2
    enabled = api.HostPolicySnapshot(
        token_budget_enabled=True, max_total_tokens=1000, budget_warn_fraction=0.8
    )
    assert enabled.max_total_tokens == 1000
    with pytest.raises(ValueError, match="max_total_tokens"):
        api.HostPolicySnapshot(max_total_tokens=1000)


def test_compaction_event_defaults_and_tuples() -> None:
    hashes = ["a", "b"]
    event = api.CompactionEvent("summarization", "1", hashes, "out", 2, 3)  # type: ignore[arg-type]
    hashes.append("c")
    assert event.source_content_hashes == ("a", "b")
    assert event.kept_content_hashes == ()
    assert (event.task_id, event.run_id, event.thread_id, event.emitted_at) == (None, None, None, None)
