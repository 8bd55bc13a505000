"""The lead builder and the host middlewares, driven end to end by the embedded model."""

from __future__ import annotations

from typing import Any

import pytest
from agent_helpers import make_config
from langchain_core.messages import AIMessage, ToolMessage

from deerflow_ext.agents.context import build_run_context
from deerflow_ext.agents.embedded_model import EmbeddedChatModel, TransientModelError
from deerflow_ext.agents.lead import build_host_stack, make_lead_agent, make_subagent
from deerflow_ext.agents.middlewares import HOST_STACK_ORDER, SubagentLimitMiddleware
from deerflow_ext.agents.policy import project_policy
from deerflow_ext.extensions.contract.snapshot import (
    EXTENSION_SNAPSHOT_CONTEXT_KEY,
    Contribution,
    LoadedExtensions,
    build_extensions,
    set_loaded_extensions,
)
from deerflow_extension_api import (
    EXTENSION_TASK_STORE_KEY,
    AgentBuildContext,
    AgentScope,
    ExtensionData,
    HostPolicySnapshot,
)


def _context(run_id: str = "run-1", **extra: Any) -> dict[str, Any]:
    return build_run_context(
        extra,
        thread_id="t-1",
        run_id=run_id,
        task_id=run_id,
        agent_name="lead",
        task_store=None,
        extensions=LoadedExtensions(),
    )


async def _run(graph: Any, text: str, **context: Any) -> dict[str, Any]:
    return await graph.ainvoke({"messages": [{"role": "user", "content": text}]}, context=_context(**context))


def _middleware_names(graph: Any) -> list[str]:
    return [name.split(".")[0] for name in graph.nodes if "." in name]


async def test_lead_agent_answers_end_to_end_with_host_stack_in_documented_order() -> None:
    config = make_config(memory={"enabled": False})
    host = build_host_stack(
        config,
        scope=AgentScope.LEAD,
        model=EmbeddedChatModel(),
        policy=project_policy(config, AgentScope.LEAD),
    )
    assert tuple(type(m) for m in host) == HOST_STACK_ORDER
    graph = make_lead_agent(config, extensions=LoadedExtensions())
    state = await _run(graph, 'use calculator {"expression": "6 * 7"}')
    assert state["messages"][-1].text == "Done. calculator returned: 42"
    assert state["run_token_usage"]["run_id"] == "run-1" and state["run_token_usage"]["total_tokens"] > 0
    assert state["thread_data"] == {"thread_id": "t-1", "run_id": "run-1", "agent_name": "lead"}


def test_subagent_stack_skips_lead_only_middlewares() -> None:
    config = make_config()
    policy = project_policy(config, AgentScope.SUBAGENT, "general-purpose")
    stack = build_host_stack(config, scope=AgentScope.SUBAGENT, model=EmbeddedChatModel(), policy=policy)
    names = [type(m).__name__ for m in stack]
    assert "TitleMiddleware" not in names and "SubagentLimitMiddleware" not in names
    assert names[0] == "ThreadDataMiddleware" and names[-1] == "ClarificationMiddleware"


@pytest.mark.parametrize(("fail_times", "ok"), [(2, True), (3, False)])
async def test_retry_layer_retries_transient_errors_twice(fail_times: int, ok: bool) -> None:
    model = EmbeddedChatModel(fail_times=fail_times)
    config = make_config(memory={"enabled": False}, title={"enabled": False})
    graph = make_lead_agent(config, extensions=LoadedExtensions(), model_factory=lambda name: model)
    if ok:
        state = await _run(graph, "hello")
        assert state["messages"][-1].text.startswith("Here is my answer")
    else:
        with pytest.raises(TransientModelError):
            await _run(graph, "hello")
    assert model.calls == 3


async def test_tool_errors_become_error_tool_messages() -> None:
    graph = make_lead_agent(make_config(memory={"enabled": False}), extensions=LoadedExtensions())
    state = await _run(graph, 'use calculator {"expression": "1 / 0"}')
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert tool_message.status == "error" and "ZeroDivisionError" in tool_message.text
    assert "ZeroDivisionError" in state["messages"][-1].text


async def test_clarification_ends_the_turn_with_the_question() -> None:
    graph = make_lead_agent(make_config(memory={"enabled": False}), extensions=LoadedExtensions())
    state = await _run(graph, 'use ask_clarification {"question": "Which city?"}')
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and last.text == "Which city?" and not last.tool_calls
    assert not any(isinstance(m, ToolMessage) for m in state["messages"])


async def test_subagent_limit_refuses_delegations_beyond_the_cap() -> None:
    config = make_config(memory={"enabled": False}, subagents={"max_per_run": 0})
    graph = make_lead_agent(config, extensions=LoadedExtensions())
    state = await _run(graph, "delegate: anything")
    refused = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert refused.status == "error" and "subagent limit" in refused.text
    assert SubagentLimitMiddleware(2).release_policy_parameters() == {"max_per_run": 2}


async def test_token_budget_stops_the_run_when_spent() -> None:
    config = make_config(memory={"enabled": False}, token_budget={"enabled": True, "max_total_tokens": 5})
    graph = make_lead_agent(config, extensions=LoadedExtensions())
    state = await _run(graph, 'use calculator {"expression": "1 + 1"}')
    assert "token budget exhausted" in state["messages"][-1].text


def test_run_context_host_keys_override_caller_values() -> None:
    mine, theirs = LoadedExtensions(), LoadedExtensions()
    store = ExtensionData("run-1")
    context = build_run_context(
        {
            EXTENSION_SNAPSHOT_CONTEXT_KEY: theirs,
            EXTENSION_TASK_STORE_KEY: ExtensionData("fake"),
            "run_id": "forged",
            "user": "kept",
        },
        thread_id="t",
        run_id="run-1",
        task_id="run-1",
        agent_name="lead",
        task_store=store,
        extensions=mine,
    )
    assert context[EXTENSION_SNAPSHOT_CONTEXT_KEY] is mine and context[EXTENSION_TASK_STORE_KEY] is store
    assert context["run_id"] == "run-1" and context["user"] == "kept"
    popped = build_run_context(
        {EXTENSION_SNAPSHOT_CONTEXT_KEY: theirs},
        thread_id="t",
        run_id="r",
        task_id="r",
        agent_name="lead",
        task_store=None,
        extensions=None,
    )
    assert EXTENSION_SNAPSHOT_CONTEXT_KEY not in popped and EXTENSION_TASK_STORE_KEY not in popped


def test_policy_projection_lead_and_subagent() -> None:
    config = make_config(
        token_budget={"enabled": False, "max_total_tokens": 100},
        subagents={
            "max_per_run": 2,
            "token_budget": {"enabled": True, "max_total_tokens": 50},
            "agents": {"researcher": {"enabled": True, "max_total_tokens": 7}},
        },
    )
    lead = project_policy(config, AgentScope.LEAD)
    assert not lead.token_budget_enabled and lead.max_total_tokens is None and lead.max_subagents_per_run == 2
    sub = project_policy(config, AgentScope.SUBAGENT, "general-purpose")
    assert sub.token_budget_enabled and sub.max_total_tokens == 50 and sub.budget_warn_fraction == 0.8
    assert project_policy(config, AgentScope.SUBAGENT, "researcher").max_total_tokens == 7


class _PromptSpy(EmbeddedChatModel):
    seen: list[str] = []

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen.append(str(messages[0].content))
        return super()._generate(messages, stop, run_manager, **kwargs)


class _Facts:
    def __init__(self) -> None:
        self.scheduled: list[str] = []

    def facts(self, thread_id: str) -> list[str]:
        return ["The user is called Ada"]

    def schedule(self, thread_id: str, messages: Any, *, extensions: Any) -> None:
        self.scheduled.append(thread_id)


async def test_memory_facts_reach_the_request_not_the_configured_prompt() -> None:
    model, memory = _PromptSpy(seen=[]), _Facts()
    config = make_config(title={"enabled": False})
    graph = make_lead_agent(config, extensions=LoadedExtensions(), memory=memory, model_factory=lambda name: model)
    await _run(graph, "hello")
    assert "<memory>\n- The user is called Ada\n</memory>" in model.seen[0]
    assert memory.scheduled == ["t-1"]


def test_disabled_budgets_project_none_for_all_five_token_fields() -> None:
    config = make_config(
        token_budget={"enabled": False, "max_input_tokens": 1, "max_output_tokens": 2, "max_total_tokens": 3},
        subagents={"agents": {"researcher": {"enabled": False, "max_total_tokens": 9}}},
    )
    token_fields = (
        "max_input_tokens",
        "max_output_tokens",
        "max_total_tokens",
        "budget_warn_fraction",
        "budget_hard_fraction",
    )
    for policy in (
        project_policy(config, AgentScope.LEAD),
        project_policy(config, AgentScope.SUBAGENT, "general-purpose"),  # no subagent budget at all
        project_policy(config, AgentScope.SUBAGENT, "researcher"),  # an override that is disabled
    ):
        assert not policy.token_budget_enabled
        assert [getattr(policy, name) for name in token_fields] == [None] * 5


class _PolicySpy:
    def __init__(self) -> None:
        self.seen: dict[str | None, HostPolicySnapshot] = {}

    def contribute_middlewares(self, app_store: Any, ctx: AgentBuildContext) -> list[Any]:
        self.seen[ctx.agent_name] = ctx.policy
        return []


def test_each_agents_build_context_carries_its_own_budget() -> None:
    config = make_config(
        token_budget={"enabled": True, "max_total_tokens": 1000},
        subagents={
            "token_budget": {"enabled": True, "max_total_tokens": 50},
            "agents": {"researcher": {"enabled": True, "max_total_tokens": 7, "hard_fraction": 0.5}},
        },
    )
    spy = _PolicySpy()
    ext = LoadedExtensions(middlewares=(Contribution("spy:install", "spy", 0, "0:spy#0", spy),))
    make_lead_agent(config, extensions=ext)
    make_subagent(config, extensions=ext)
    make_subagent(config, extensions=ext, agent_name="researcher")
    assert spy.seen["lead"].max_total_tokens == 1000 and spy.seen["lead"].max_subagents_per_run == 3
    assert spy.seen["general-purpose"].max_total_tokens == 50
    assert spy.seen["general-purpose"].max_subagents_per_run == 0
    researcher = spy.seen["researcher"]
    assert (researcher.max_total_tokens, researcher.budget_hard_fraction) == (7, 0.5)


def test_construction_binds_the_runs_snapshot_only_while_it_builds(restore_process_extensions: None) -> None:
    process_wide = LoadedExtensions()
    set_loaded_extensions(process_wide)
    during: list[LoadedExtensions] = []

    class Probe:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[Any]:
            during.append(build_extensions())
            return []

    run = LoadedExtensions(middlewares=(Contribution("probe:install", "probe", 0, "0:probe#0", Probe()),))
    make_lead_agent(make_config(), extensions=run)
    make_subagent(make_config(), extensions=run)
    assert during == [run, run] and all(seen is run for seen in during)
    assert build_extensions() is process_wide  # the binding has exited with construction


@pytest.mark.parametrize("scope", [AgentScope.LEAD, AgentScope.SUBAGENT])
def test_the_host_stack_describes_alike_for_one_config_scope_and_policy(scope: AgentScope) -> None:
    # What lets a construction hand out the host's descriptors again (lead._describe_stack):
    # of the rest build_host_stack is given, the models and which memory (not whether there
    # is one: that is in the key) never show in a host descriptor.
    from deerflow_ext.extensions.composition.assembly import describe_middleware

    config = make_config(title={"max_chars": 33}, retry={"max_retries": 4})

    def described(memory: Any, **system: Any) -> list[tuple[str, dict[str, Any]]]:
        stack = build_host_stack(
            config,
            scope=scope,
            model=EmbeddedChatModel(),
            policy=project_policy(config, scope, "general-purpose"),  # equal, not the same object
            memory=memory,
            system_models=system,
        )
        return [(d.name, dict(d.policy_parameters)) for d in map(describe_middleware, stack)]

    first = described(object())
    assert described(object(), title=EmbeddedChatModel(), summarization=EmbeddedChatModel()) == first
    assert ("LLMErrorHandlingMiddleware", {"max_retries": 4}) in first
    if scope is AgentScope.LEAD:
        assert ("TitleMiddleware", {"enabled": True, "max_chars": 33}) in first
        assert ("MemoryMiddleware", {"enabled": False}) in described(None)  # why presence is keyed


def test_a_construction_describes_the_host_once_per_config_and_contributions_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deerflow_ext.agents import lead
    from deerflow_ext.extensions.composition.assembly import describe_middleware
    from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware

    class Probe(SubagentLimitMiddleware):
        pass

    def stack_of(config: Any, memory: Any = None) -> tuple[list[Any], list[Any], HostPolicySnapshot]:
        policy = project_policy(config, AgentScope.LEAD)
        host = build_host_stack(config, scope=AgentScope.LEAD, model=EmbeddedChatModel(), policy=policy, memory=memory)
        contributed = IsolatedMiddleware(Probe(7), extension="probe:install", diagnostics=[])
        return [host[0], contributed, *host[1:]], host, policy

    config = make_config(title={"max_chars": 40})
    calls: list[str] = []

    def counted(middleware: Any) -> Any:
        calls.append(type(middleware).__name__)
        return describe_middleware(middleware)

    monkeypatch.setattr(lead, "describe_middleware", counted)
    for construction in range(2):
        stack, host, policy = stack_of(config)
        calls.clear()
        got = lead._describe_stack(stack, host, config, AgentScope.LEAD, policy, None)
        assert got == tuple(map(describe_middleware, stack))  # the same as describing each
        # the first describes all; the second only the contribution
        assert len(calls) == (len(stack) if construction == 0 else 1)
    changed = make_config(title={"max_chars": 41})  # another configuration: described anew
    stack, host, policy = stack_of(changed)
    fresh = lead._describe_stack(stack, host, changed, AgentScope.LEAD, policy, None)
    titles = [dict(d.policy_parameters) for d in fresh if d.name == "TitleMiddleware"]
    assert titles == [{"enabled": True, "max_chars": 41}]
    memory = object()  # the same configuration with a memory: its middleware is enabled
    stack, host, policy = stack_of(changed, memory)
    with_memory = lead._describe_stack(stack, host, changed, AgentScope.LEAD, policy, memory)
    assert with_memory == tuple(map(describe_middleware, stack))
    assert [dict(d.policy_parameters) for d in with_memory if d.name == "MemoryMiddleware"] == [{"enabled": True}]
