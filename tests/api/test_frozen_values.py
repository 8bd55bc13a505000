from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import deerflow_extension_api as api


async def _handler(payload: Any, context: Any) -> None:
    return None


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
    # 0.2.2 to 0.2.6
    api.ExtensionPrincipal("u"),
    api.ActionContext(api.ExtensionPrincipal("u"), {}),
    api.ToolContext(api.ExtensionPrincipal("u"), {}, "thread"),
    api.BackendAction("act", _handler),
    api.ModelTool("tool", "d", {"type": "object"}, _handler),
    api.BrowserModule("acme.page", "export default {}"),
    api.BrowserAssets("acme.page", "/tmp"),
    api.PluginContribution("acme.ns", "Acme"),
    api.SettingsField("limit", "Limit", "integer", 3),
    api.MessageProvenance("memory", "dynamic_context_memory"),
    api.RunStatusView(),
    api.RunEventView(),
    api.RunPage(),
    api.RunEventPage(),
    api.AgentRun("th", "r", "running"),
    api.ModelMessage("user", "hi"),
    api.ModelInvocationRequest([api.ModelMessage("user", "hi")]),
    api.ModelInvocationResult("answer"),
    api.ModelUsage(),
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
    enabled = api.HostPolicySnapshot(token_budget_enabled=True, max_total_tokens=1000, budget_warn_fraction=0.8)
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


def _descriptor(**overrides: Any) -> api.AgentAssemblyDescriptor:
    values: dict[str, Any] = {
        "namespace": "ns",
        "agent_name": "lead",
        "requested_model": None,
        "effective_model": "m",
        "model_parameters": {"temperature": 0.1, "stop": ["END"]},
        "thinking_enabled": False,
        "reasoning_effort": None,
        "base_prompt_hash": "h",
        "tools": (),
        "middlewares": (),
        "deferred_tool_names": (),
        "enabled_skills": (),
        "effective_policies": {"Budget": {"cap": {"usd": 5}}},
    }
    values.update(overrides)
    return api.AgentAssemblyDescriptor(**values)


def test_a_fingerprint_cannot_go_stale_when_the_caller_mutates_what_it_passed() -> None:
    parameters: dict[str, Any] = {"temperature": 0.1, "stop": ["END"]}
    policies: dict[str, Any] = {"Budget": {"cap": {"usd": 5}}}
    policy_parameters: dict[str, Any] = {"cap": {"usd": 5}, "tags": ["a"]}
    middleware = api.MiddlewareDescriptor("Budget", "acme.mw", policy_parameters)
    descriptor = _descriptor(model_parameters=parameters, effective_policies=policies, middlewares=[middleware])
    before = descriptor.fingerprint

    parameters["temperature"] = 0.9
    parameters["stop"].append("STOP")
    policies["Budget"]["cap"]["usd"] = 500
    policies["Other"] = {}
    policy_parameters["tags"].append("b")
    policy_parameters["cap"]["usd"] = 6

    assert descriptor.model_parameters == {"temperature": 0.1, "stop": ["END"]}
    assert descriptor.effective_policies == {"Budget": {"cap": {"usd": 5}}}
    assert middleware.policy_parameters == {"cap": {"usd": 5}, "tags": ["a"]}
    same = api.MiddlewareDescriptor("Budget", "acme.mw", {"cap": {"usd": 5}, "tags": ["a"]})
    rebuilt = _descriptor(middlewares=[same])
    assert descriptor.fingerprint == before == rebuilt.fingerprint


def test_frozen_mappings_refuse_changes_through_the_descriptor_too() -> None:
    descriptor = _descriptor()
    with pytest.raises(TypeError, match="read-only"):
        descriptor.model_parameters["temperature"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        descriptor.model_parameters["stop"].append("x")
    with pytest.raises(TypeError, match="read-only"):
        descriptor.effective_policies["Budget"].update(cap=None)
    with pytest.raises(TypeError, match="read-only"):
        descriptor.build.setdefault("sha", "x")  # type: ignore[attr-defined]


def test_frozen_mappings_keep_dict_equality_repr_hash_json_pickle_and_copy() -> None:
    import copy
    import json
    import pickle

    descriptor = _descriptor()
    plain = {"temperature": 0.1, "stop": ["END"]}
    assert descriptor.model_parameters == plain
    assert isinstance(descriptor.model_parameters, dict)
    assert repr(descriptor.model_parameters) == repr(plain)
    assert "model_parameters={'temperature': 0.1, 'stop': ['END']}" in repr(descriptor)
    assert json.dumps(descriptor.effective_policies) == json.dumps({"Budget": {"cap": {"usd": 5}}})
    assert descriptor == _descriptor()
    with pytest.raises(TypeError):
        hash(descriptor)  # as before: a dataclass holding dicts is unhashable
    for clone in (pickle.loads(pickle.dumps(descriptor)), copy.deepcopy(descriptor), copy.copy(descriptor)):
        assert clone == descriptor
        assert clone.fingerprint == descriptor.fingerprint
        with pytest.raises(TypeError, match="read-only"):
            clone.model_parameters["stop"].append("x")


def test_a_system_request_keeps_its_own_copy_of_the_run_config() -> None:
    callbacks: list[Any] = []
    config: dict[str, Any] = {"tags": ["nostream"], "callbacks": callbacks}
    request = api.SystemModelRequest("prompt", invoke_config=config)
    config["tags"] = ["other"]
    config["metadata"] = {}
    assert request.invoke_config == {"tags": ["nostream"], "callbacks": callbacks}
    assert request.invoke_config is not None and request.invoke_config["callbacks"] is callbacks  # live objects stay
    with pytest.raises(TypeError, match="read-only"):
        request.invoke_config["tags"] = []  # type: ignore[index]
    assert api.SystemModelRequest("prompt").invoke_config is None
