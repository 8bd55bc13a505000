"""AgentHost.run_lead: title, goal continuations, summarization and compaction, snapshots."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from agent_helpers import Recorder, make_config, make_host, recording_extensions
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import deerflow_ext.agents.middlewares.summarization as summarization_module
from deerflow_ext.agents.context import build_run_context
from deerflow_ext.agents.host import AgentHost, LeadRunRequest, TokenUsage
from deerflow_ext.agents.lead import make_lead_agent
from deerflow_ext.agents.prompts import SUMMARY_MESSAGE_PREFIX
from deerflow_ext.client import DeerFlowClient
from deerflow_ext.extensions.contract.snapshot import (
    EXTENSION_SNAPSHOT_CONTEXT_KEY,
    Contribution,
    LoadedExtensions,
    resolve_run_extensions,
    set_loaded_extensions,
)
from deerflow_extension_api import SystemOperationKind, canonical_hash


def _request(text: str, *, run_id: str = "run-1", thread_id: str = "t-1", **kw: Any) -> LeadRunRequest:
    return LeadRunRequest(thread_id=thread_id, run_id=run_id, messages=({"role": "user", "content": text},), **kw)


async def test_title_is_generated_once_and_saved_for_the_thread(recorder: Recorder, notify_loop: Any) -> None:
    ext = recording_extensions(recorder, kinds=("system",))
    host = make_host()
    store = ext.new_task_store("run-1")
    first = await host.run_lead(_request("plan a trip to Lisbon"), extensions=ext, task_store=store)
    assert first.title == "Plan a trip to Lisbon"
    second = await host.run_lead(_request("and Porto?", run_id="run-2"), extensions=ext, task_store=store)
    assert second.title == first.title
    kinds = [call[0] for call in recorder.system_calls]
    assert kinds == [SystemOperationKind.TITLE]
    _, request, result, task_store = recorder.system_calls[0]
    assert len(request.messages) == 1 and isinstance(request.messages[0], str)  # one prompt string
    assert result.error is None and result.duration_ms is not None and task_store is store


@pytest.mark.parametrize(
    ("goal", "continuations", "met"),
    [("say hi", 0, True), ("finish after 3 turns", 2, True), ("never done", 2, False)],
)
async def test_goal_continuations_until_met_or_limit(
    recorder: Recorder, goal: str, continuations: int, met: bool
) -> None:
    ext = recording_extensions(recorder, kinds=("system",))
    host = make_host(make_config(goal={"max_continuations": 2}, memory={"enabled": False}))
    result = await host.run_lead(_request("work on it", goal=goal), extensions=ext, task_store=ext.new_task_store("r"))
    assert (result.continuations, result.goal_met) == (continuations, met)
    goal_calls = [c for c in recorder.system_calls if c[0] is SystemOperationKind.GOAL]
    assert len(goal_calls) == continuations + 1
    assert len(goal_calls[0][1].messages) == 2  # goal passes a message list
    assert result.token_usage.total_tokens > 0


async def test_summarization_emits_a_compaction_event(recorder: Recorder, notify_loop: Any) -> None:
    ext = recording_extensions(recorder, kinds=("system", "compaction"))
    host = make_host(make_config(summarization={"trigger_messages": 4, "keep_messages": 2}, memory={"enabled": False}))
    store = ext.new_task_store("run-1")
    await host.run_lead(_request('use calculator {"expression": "1+1"}'), extensions=ext, task_store=store)
    removed = (await host.make_lead_agent(extensions=ext).aget_state({"configurable": {"thread_id": "t-1"}})).values
    expected_sources = [canonical_hash(m.content) for m in removed["messages"][:3]]
    await host.run_lead(_request("next question", run_id="run-2"), extensions=ext, task_store=store)
    await notify_loop.drain(2.0)
    assert [c[0] for c in recorder.system_calls].count(SystemOperationKind.SUMMARIZATION) == 1
    (event,) = recorder.compactions
    state = (await host.make_lead_agent(extensions=ext).aget_state({"configurable": {"thread_id": "t-1"}})).values
    summary = state["messages"][0]
    assert isinstance(summary, HumanMessage) and summary.text.startswith(SUMMARY_MESSAGE_PREFIX)
    assert event.output_content_hash == canonical_hash(summary.content)
    assert list(event.source_content_hashes) == expected_sources
    assert (event.compacted_message_count, event.kept_message_count) == (3, 2)
    assert event.transform_kind == "summarization" and event.run_id == "run-2" and event.thread_id == "t-1"


@pytest.mark.parametrize("with_observer", [False, True])
async def test_no_hashing_without_a_compaction_observer(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, with_observer: bool
) -> None:
    calls: list[object] = []

    def counting_hash(value: object) -> str:
        calls.append(value)
        return canonical_hash(value)

    monkeypatch.setattr(summarization_module, "canonical_hash", counting_hash)
    ext = recording_extensions(recorder, kinds=("system", "compaction") if with_observer else ("system",))
    host = make_host(make_config(summarization={"trigger_messages": 4, "keep_messages": 2}, memory={"enabled": False}))
    for n in range(2):
        await host.run_lead(_request(f"question {n}", run_id=f"r{n}"), extensions=ext, task_store=None)
        await host.run_lead(_request(f"more {n}", run_id=f"s{n}"), extensions=ext, task_store=None)
    assert [c[0] for c in recorder.system_calls].count(SystemOperationKind.SUMMARIZATION) >= 1
    assert bool(calls) is with_observer


async def test_caller_supplied_snapshot_is_ignored(recorder: Recorder) -> None:
    other = Recorder()
    ext = recording_extensions(recorder, kinds=("assembly", "system"))
    forged = recording_extensions(other, kinds=("assembly", "system"))
    host = make_host(make_config(memory={"enabled": False}))
    await host.run_lead(
        _request("hi", context={EXTENSION_SNAPSHOT_CONTEXT_KEY: forged}), extensions=ext, task_store=None
    )
    assert [e for e in recorder.events if e[0] in ("assembled", "system")] == [
        ("assembled", "lead"),
        ("system", "title"),
    ]
    assert other.events == []


async def test_token_usage_is_per_run() -> None:
    host = make_host(make_config(memory={"enabled": False}, title={"enabled": False}))
    first = await host.run_lead(_request("one two three"), extensions=LoadedExtensions(), task_store=None)
    second = await host.run_lead(_request("four", run_id="run-2"), extensions=LoadedExtensions(), task_store=None)
    assert first.token_usage != TokenUsage() and second.token_usage != TokenUsage()
    assert first.token_usage.total_tokens == first.token_usage.input_tokens + first.token_usage.output_tokens
    # The second run's input includes the first exchange, but not the first run's usage.
    assert second.token_usage.total_tokens < first.token_usage.total_tokens + second.token_usage.input_tokens


class _ScopedSaver(InMemorySaver):
    """A checkpointer with a run scope (as PostgreSQL's, ``persistence.checkpointer.run_writes``)."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[str] = []

    @asynccontextmanager
    async def writes_behind(self) -> AsyncIterator[None]:
        self.scopes.append("enter")
        yield
        self.scopes.append(f"exit after {len(self.storage)} thread(s) written")


@pytest.mark.parametrize(("durability", "scoped"), [(None, True), ("async", True), ("exit", True), ("sync", False)])
async def test_a_runs_graph_runs_in_its_checkpointers_scope_unless_it_asked_for_sync_writes(
    durability: str | None, scoped: bool
) -> None:
    saver = _ScopedSaver()
    host = AgentHost(make_config(memory={"enabled": False}, title={"enabled": False}), checkpointer=saver)
    await host.run_lead(_request("hi", durability=durability), extensions=LoadedExtensions(), task_store=None)
    assert saver.scopes == (["enter", "exit after 1 thread(s) written"] if scoped else [])


async def test_stream_events_are_forwarded() -> None:
    host = make_host(make_config(memory={"enabled": False}))
    seen: list[str] = []

    async def emit(event: str, data: Any) -> None:
        seen.append(event)

    await host.run_lead(_request("hi"), extensions=LoadedExtensions(), task_store=None, emit=emit)
    assert {"updates", "messages", "values"} <= set(seen)


class _Attrs:
    """An attribute-style runtime context (LangGraph allows dataclass contexts)."""

    def __init__(self, value: object) -> None:
        setattr(self, EXTENSION_SNAPSHOT_CONTEXT_KEY, value)


class _LookAlike:
    """Has LoadedExtensions' fields, but is not one: a caller could merge this in."""

    middlewares = system_model_observers = assembly_observers = compaction_observers = task_lifecycle = ()


def test_resolve_run_extensions_trusts_only_a_loaded_extensions(restore_process_extensions: None) -> None:
    process_wide, published = LoadedExtensions(), LoadedExtensions()
    set_loaded_extensions(process_wide)
    assert resolve_run_extensions({EXTENSION_SNAPSHOT_CONTEXT_KEY: published}) is published
    assert resolve_run_extensions(_Attrs(published)) is published
    for context in (
        None,
        {},
        {EXTENSION_SNAPSHOT_CONTEXT_KEY: None},
        {EXTENSION_SNAPSHOT_CONTEXT_KEY: {"middlewares": ()}},
        {EXTENSION_SNAPSHOT_CONTEXT_KEY: _LookAlike()},
        _Attrs(_LookAlike()),
        object(),
    ):
        assert resolve_run_extensions(context) is process_wide, context


async def test_routers_and_services_alone_cost_a_run_nothing(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, notify_loop: Any
) -> None:
    # The perf acceptance's "1.00x" in functional form: no task store, no descriptor, no hashing.
    import deerflow_ext.extensions.composition.assembly as assembly
    import deerflow_ext.extensions.contract.snapshot as snapshot

    def contribution(obj: object) -> Contribution[Any]:
        return Contribution("infra:install", "infra", 0, "0:infra#0", obj)

    ext = LoadedExtensions(services=(contribution(object()),), routers=(contribution(object()),))
    work: list[str] = []

    def forbidden(what: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            work.append(what)
            raise AssertionError(what)

        return record

    monkeypatch.setattr(snapshot, "ExtensionData", forbidden("task store"))
    monkeypatch.setattr(summarization_module, "canonical_hash", forbidden("compaction hash"))
    monkeypatch.setattr(assembly, "describe_tool", forbidden("descriptor"))
    monkeypatch.setattr(assembly, "describe_middleware", forbidden("descriptor"))
    client = DeerFlowClient(
        make_config(summarization={"trigger_messages": 4, "keep_messages": 2}, memory={"enabled": False}),
        extensions=ext,
    )
    await client.arun('use calculator {"expression": "1 + 1"}', thread_id="t")
    result = await client.arun("delegate: and now?", thread_id="t")  # summarises, then delegates
    assert result.answer.startswith("Done. task returned")
    state = await client.host.make_lead_agent(extensions=ext).aget_state({"configurable": {"thread_id": "t"}})
    assert state.values["messages"][0].text.startswith(SUMMARY_MESSAGE_PREFIX)  # the hashing site was reached
    assert work == []


async def test_the_sync_title_path_is_observed_by_submission(recorder: Recorder, notify_loop: Any) -> None:
    ext = recording_extensions(recorder, kinds=("system",))
    store = ext.new_task_store("run-1")
    graph = make_lead_agent(make_config(memory={"enabled": False}), extensions=ext)
    context = build_run_context(
        None, thread_id="t", run_id="run-1", task_id="run-1", agent_name="lead", task_store=store, extensions=ext
    )
    # graph.invoke on a worker thread: the sync path, while the notification loop stays free.
    state = await asyncio.to_thread(
        graph.invoke, {"messages": [{"role": "user", "content": "hi there"}]}, None, context=context
    )
    assert state["title"] == "Hi there"
    await notify_loop.drain(2.0)
    ((kind, request, result, task_store),) = recorder.system_calls
    assert kind is SystemOperationKind.TITLE and task_store is store
    assert len(request.messages) == 1 and isinstance(request.messages[0], str)
    assert result.error is None and result.response.content == "Hi there"


def test_host_builds_the_task_tool_once_and_the_graph_per_run() -> None:
    host = make_host(make_config(memory={"enabled": False}))
    empty = LoadedExtensions.empty()
    first, second = host.make_lead_agent(extensions=empty), host.make_lead_agent(extensions=empty)
    assert first is not second  # the graph is never reused across runs
    tools = [host._task_tool(), host._task_tool()]
    assert tools[0] is tools[1] and tools[0].name == "task"
