"""Plugin model tools in the agent: DeerFlow's names, its limits at and past their edges,
failures the model reads (never a crashed run), host tools first, the descriptor's source."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest
from agent_helpers import make_config
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

import deerflow_ext.extensions.composition.plugin_tools as plugin_tools_module
from deerflow_ext.agents.context import build_run_context
from deerflow_ext.agents.lead import make_lead_agent, make_subagent
from deerflow_ext.extensions.composition.plugin_tools import (
    MAX_INPUT_BYTES,
    MAX_OUTPUT_BYTES,
    build_plugin_tools,
    merge_tools,
    plugin_tool_name,
    plugin_tools,
    tool_source,
)
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_extension_api import AgentAssemblyDescriptor, ModelTool, PluginContribution, ToolContext

NS = "acme.notes"
SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "size": {"type": "integer"}},
    "required": ["query"],
    "additionalProperties": False,
}


class Handler:
    """A plugin tool's handler that records what it was called with."""

    def __init__(self, result: Any = None, *, delay: float = 0.0, error: Exception | None = None) -> None:
        self.calls: list[tuple[dict[str, Any], ToolContext]] = []
        self.result, self.delay, self.error = result, delay, error

    async def __call__(self, payload: Mapping[str, Any], context: ToolContext) -> Any:
        self.calls.append((dict(payload), context))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        if self.result is None:
            return {"found": payload["query"], "user": context.principal.user_id, "thread": context.thread_id}
        return self.result


class Recorder:
    def __init__(self) -> None:
        self.descriptors: list[AgentAssemblyDescriptor] = []

    def on_agent_assembled(self, app_store: Any, descriptor: AgentAssemblyDescriptor) -> None:
        self.descriptors.append(descriptor)


def declared(name: str, handler: Handler, group: str = "extensions") -> ModelTool:
    # Registration wants an ``async def`` (as DeerFlow's does), not an object with an async __call__.
    async def run(payload: Mapping[str, Any], context: ToolContext) -> Any:
        return await handler(payload, context)

    return ModelTool(name, "Search the notes.", SCHEMA, run, group)


def plugin(
    handler: Handler, *, namespace: str = NS, name: str = "search", group: str = "extensions", **kw: Any
) -> PluginContribution:
    return PluginContribution(namespace, "Notes", enabled=True, tools=(declared(name, handler, group),), **kw)


def extensions(*plugins: PluginContribution, observer: Recorder | None = None) -> LoadedExtensions:
    registry = HostRegistry()
    registry.begin(0, "notes", "acme_notes:install")
    for item in plugins:
        assert registry.plugin(item) is True
    if observer is not None:
        registry.agent_assembly_observer(observer)
    registry.end()
    return registry.freeze(loaded=["acme_notes:install"], total=1)


async def call(tool: BaseTool, args: dict[str, Any], thread_id: str = "t-1") -> ToolMessage:
    """Dispatch one call through LangGraph's own ToolNode, as the agent does."""
    graph = StateGraph(MessagesState, context_schema=dict)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    message = AIMessage("", tool_calls=[{"name": tool.name, "args": args, "id": "call-1"}])
    state = await graph.compile().ainvoke({"messages": [message]}, context={"thread_id": thread_id})
    result = state["messages"][-1]
    assert isinstance(result, ToolMessage)
    return result


def only_tool(ext: LoadedExtensions) -> BaseTool:
    (built,) = plugin_tools(ext)
    return built


# -- names ---------------------------------------------------------------------------------------
def test_names_are_derived_as_deerflow_derives_them() -> None:
    digest = hashlib.sha256(b"community.bookmarks:search_bookmarks").hexdigest()[:12]
    assert (
        plugin_tool_name("community.bookmarks", "search_bookmarks")
        == f"ext_community_bookmarks_search_bookmarks_{digest}"
    )
    long = plugin_tool_name("a" * 40, "b" * 40)
    assert long.startswith("ext_" + "a" * 20 + "_" + "b" * 25 + "_") and len(long) == 4 + 20 + 1 + 25 + 1 + 12
    assert plugin_tool_name("acme.x", "t") != plugin_tool_name("acme_x", "t")  # the hash tells them apart


# -- the agent calls it ---------------------------------------------------------------------------------
async def test_the_lead_agent_calls_a_plugin_tool_with_the_host_bound_context() -> None:
    handler = Handler()
    ext = extensions(plugin(handler))
    name = plugin_tool_name(NS, "search")
    graph = make_lead_agent(make_config(memory={"enabled": False}, title={"enabled": False}), extensions=ext)
    context = build_run_context(
        {"user_id": "mallory"},
        thread_id="t-1",
        run_id="r-1",
        task_id="r-1",
        agent_name="lead",
        task_store=None,
        extensions=ext,
    )
    state = await graph.ainvoke(
        {"messages": [{"role": "user", "content": f'use {name} {{"query": "milk"}}'}]}, context=context
    )
    assert (
        state["messages"][-1].text == f'Done. {name} returned: {{"found": "milk", "user": "default", "thread": "t-1"}}'
    )
    ((payload, tool_context),) = handler.calls
    assert payload == {"query": "milk"}  # runtime is injected by LangChain, never passed on
    assert tool_context.principal.user_id == "default" and tool_context.principal.is_admin is False
    with pytest.raises(TypeError):
        tool_context.settings["enabled"] = False  # type: ignore[index]


async def test_a_tool_sees_the_runs_owner_never_a_langgraph_key_the_caller_sent() -> None:
    """The run's owner reaches a tool as the host's ``user_id`` (the Gateway records it from
    the authenticated request); a caller's ``langgraph_auth_user_id`` in the context is not
    the principal (the run routes drop it too: ``test_identity_principal``)."""
    handler = Handler()
    ext = extensions(plugin(handler))
    name = plugin_tool_name(NS, "search")
    graph = make_lead_agent(make_config(memory={"enabled": False}, title={"enabled": False}), extensions=ext)
    context = build_run_context(
        {"langgraph_auth_user_id": "mallory", "user_id": "mallory"},
        thread_id="t-1",
        run_id="r-1",
        task_id="r-1",
        agent_name="lead",
        task_store=None,
        extensions=ext,
        user_id="alice",
    )
    await graph.ainvoke({"messages": [{"role": "user", "content": f'use {name} {{"query": "milk"}}'}]}, context=context)
    ((_, tool_context),) = handler.calls
    assert tool_context.principal.user_id == "alice" and tool_context.principal.is_admin is False


async def test_a_subagent_gets_the_plugin_tools_too() -> None:
    handler = Handler()
    ext = extensions(plugin(handler))
    name = plugin_tool_name(NS, "search")
    graph = make_subagent(make_config(memory={"enabled": False}), extensions=ext)
    context = build_run_context(
        None, thread_id=None, run_id="r", task_id="r", agent_name="general-purpose", task_store=None, extensions=ext
    )
    state = await graph.ainvoke(
        {"messages": [{"role": "user", "content": f'use {name} {{"query": "x"}}'}]}, context=context
    )
    assert state["messages"][-1].text.startswith(f"Done. {name} returned:") and len(handler.calls) == 1


def test_a_disabled_plugin_gives_no_tools_and_groups_filter() -> None:
    disabled = extensions(PluginContribution(NS, "Notes", tools=(declared("search", Handler()),)))
    assert plugin_tools(disabled) == ()
    ext = extensions(plugin(Handler()), plugin(Handler(), namespace="acme.other", group="research"))
    assert [t.name for t in build_plugin_tools(ext.plugins, groups=["research"])] == [
        plugin_tool_name("acme.other", "search")
    ]
    assert len(build_plugin_tools(ext.plugins)) == 2
    assert plugin_tools(ext) is plugin_tools(ext)  # built once per snapshot: the graph stays reusable


# -- limits ---------------------------------------------------------------------------------------------
def _query_of_bytes(total: int) -> dict[str, Any]:
    overhead = len(json.dumps({"query": ""}).encode())
    return {"query": "x" * (total - overhead)}


async def test_input_at_256_kib_is_accepted_and_past_it_refused() -> None:
    handler = Handler(result="ok")
    built = only_tool(extensions(plugin(handler)))
    at = _query_of_bytes(MAX_INPUT_BYTES)
    assert len(json.dumps(at).encode()) == MAX_INPUT_BYTES
    assert (await call(built, at)).status == "success"
    past = await call(built, _query_of_bytes(MAX_INPUT_BYTES + 1))
    assert (past.status, past.text) == ("error", "Invalid plugin tool input.")
    assert len(handler.calls) == 1


@pytest.mark.parametrize("args", [{"query": 3}, {}, {"query": "x", "user_id": "admin"}, {"query": "x", "size": "big"}])
async def test_input_that_breaks_the_schema_never_reaches_the_handler(args: dict[str, Any]) -> None:
    handler = Handler()
    result = await call(only_tool(extensions(plugin(handler))), args)
    assert (result.status, result.text) == ("error", "Invalid plugin tool input.")
    assert handler.calls == []


async def test_output_at_64_kib_is_returned_and_past_it_refused() -> None:
    overhead = len(json.dumps("").encode())
    at = await call(only_tool(extensions(plugin(Handler(result="y" * (MAX_OUTPUT_BYTES - overhead))))), {"query": "q"})
    assert at.status == "success" and len(at.text.encode()) == MAX_OUTPUT_BYTES
    past = await call(
        only_tool(extensions(plugin(Handler(result="y" * (MAX_OUTPUT_BYTES - overhead + 1))))), {"query": "q"}
    )
    assert (past.status, past.text) == ("error", "Plugin result exceeds 64 KiB.")
    wide = await call(only_tool(extensions(plugin(Handler(result="é" * (MAX_OUTPUT_BYTES // 2))))), {"query": "q"})
    assert wide.status == "error"  # counted in UTF-8 bytes, not characters


async def test_a_slow_handler_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin_tools_module, "CALL_TIMEOUT_SECONDS", 0.05)
    result = await call(only_tool(extensions(plugin(Handler(delay=5)))), {"query": "q"})
    assert (result.status, result.text) == ("error", "Plugin tool unavailable or input rejected.")


async def test_a_failing_handler_is_a_tool_error_without_its_message(caplog: pytest.LogCaptureFixture) -> None:
    handler = Handler(error=RuntimeError("db password is hunter2"))
    with caplog.at_level(logging.WARNING, logger="deerflow_ext.extensions"):
        result = await call(only_tool(extensions(plugin(handler))), {"query": "q"})
    assert (result.status, result.text) == ("error", "Plugin tool unavailable or input rejected.")
    assert "hunter2" not in caplog.text and "acme.notes.search failed: RuntimeError" in caplog.text


async def test_an_unserialisable_result_is_a_tool_error() -> None:
    result = await call(only_tool(extensions(plugin(Handler(result={"x": {1, 2}})))), {"query": "q"})
    assert (result.status, result.text) == ("error", "Plugin tool unavailable or input rejected.")


async def test_a_failing_tool_does_not_crash_the_run() -> None:
    ext = extensions(plugin(Handler(error=ValueError("boom"))))
    name = plugin_tool_name(NS, "search")
    graph = make_lead_agent(make_config(memory={"enabled": False}, title={"enabled": False}), extensions=ext)
    context = build_run_context(
        None, thread_id="t", run_id="r", task_id="r", agent_name="lead", task_store=None, extensions=ext
    )
    state = await graph.ainvoke(
        {"messages": [{"role": "user", "content": f'use {name} {{"query": "x"}}'}]}, context=context
    )
    assert state["messages"][-1].text == f"Done. {name} returned: Plugin tool unavailable or input rejected."


# -- collisions and the descriptor ------------------------------------------------------------------------
def test_host_tools_come_first_and_plugin_collisions_are_refused(caplog: pytest.LogCaptureFixture) -> None:
    ext = extensions(plugin(Handler()))
    built = only_tool(ext)

    @tool(built.name)
    def host_tool(query: str) -> str:
        """The host's own tool of that name."""
        return "host"

    with caplog.at_level(logging.WARNING, logger="deerflow_ext.extensions"):
        merged = merge_tools([host_tool], [built])
    assert merged == [host_tool] and "left out" in caplog.text
    with pytest.raises(ValueError, match="Plugin tool name collision"):
        build_plugin_tools(ext.plugins, reserved_names=[built.name])


def test_the_descriptor_names_the_plugin_and_the_fingerprint_follows_its_tools() -> None:
    fingerprints = []
    for tools in (("search",), ("search", "browse")):
        recorder = Recorder()
        ext = extensions(
            PluginContribution(NS, "Notes", enabled=True, tools=tuple(declared(n, Handler()) for n in tools)),
            observer=recorder,
        )
        make_lead_agent(make_config(memory={"enabled": False}), extensions=ext)
        (descriptor,) = recorder.descriptors
        sources = {d.name: d.source for d in descriptor.tools}
        assert all(sources[plugin_tool_name(NS, n)] == "plugin:acme.notes" for n in tools)
        assert sources["calculator"] == "builtin"
        fingerprints.append(descriptor.fingerprint)
    assert fingerprints[0] != fingerprints[1]
    assert tool_source(object()) == "builtin"


def test_a_graph_run_synchronously_calls_the_tool_too() -> None:
    handler = Handler(result="sync ok")
    built = only_tool(extensions(plugin(handler)))
    graph = StateGraph(MessagesState, context_schema=dict)
    graph.add_node("tools", ToolNode([built]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    message = AIMessage("", tool_calls=[{"name": built.name, "args": {"query": "q"}, "id": "call-1"}])
    state = graph.compile().invoke({"messages": [message]}, context={"thread_id": "t-2"})
    assert state["messages"][-1].text == '"sync ok"' and handler.calls[0][1].thread_id == "t-2"


# -- groups per agent and the run's principal ------------------------------------------------------
async def test_lead_and_subagents_get_their_tool_groups_and_the_tool_acts_for_the_runs_user() -> None:
    lead_handler, research_handler = Handler(), Handler()
    ext = extensions(plugin(lead_handler), plugin(research_handler, namespace="acme.other", group="research"))
    lead_name, research_name = plugin_tool_name(NS, "search"), plugin_tool_name("acme.other", "search")
    config = make_config(memory={"enabled": False}, tool_groups=["extensions"], subagents={"tool_groups": ["research"]})
    context = build_run_context(
        None, thread_id="t", run_id="r", task_id="r", agent_name="x", task_store=None, extensions=ext, user_id="alice"
    )
    lead = make_lead_agent(config, extensions=ext)
    sub = make_subagent(config, extensions=ext)
    for graph, good, bad in ((lead, lead_name, research_name), (sub, research_name, lead_name)):
        for name in (good, bad):
            prompt = f'use {name} {{"query": "x"}}'
            state = await graph.ainvoke(
                {"messages": [{"role": "user", "content": prompt}]},
                {"configurable": {"thread_id": name}},
                context=context,
            )
            assert state["messages"][-1].text.startswith(f"Done. {name} returned:") is (name == good)
    assert [c[1].principal.user_id for c in lead_handler.calls + research_handler.calls] == ["alice", "alice"]
