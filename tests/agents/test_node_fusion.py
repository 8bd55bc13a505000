"""Runs of host node hooks compile to one graph step each, and behave as separate nodes did."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

import pytest
from agent_helpers import make_config, make_host
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deerflow_ext.agents.embedded_model import EmbeddedChatModel
from deerflow_ext.agents.fused_nodes import ModelBracket, bracket_model_node
from deerflow_ext.agents.host import LeadRunRequest
from deerflow_ext.agents.node_fusion import fuse_host_node_hooks
from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_ext.memo import Memo
from deerflow_extension_api import MiddlewarePlacement, Placement


def _joined(left: list[str] | None, right: list[str] | None) -> list[str]:
    return [*(left or []), *(right or [])]


class NoteState(AgentState):
    note: NotRequired[str]  # a plain value: the last write wins
    trail: NotRequired[Annotated[list[str], _joined]]  # a reducer: every write is kept


class Hooks(AgentMiddleware):
    """Each hook records what it read and writes something the next one reads."""

    state_schema = NoteState

    def __init__(self, name: str, log: list[tuple[str, Any]], *, jump: bool = False) -> None:
        super().__init__()
        self._label = name
        self.log = log
        self.jump = jump

    @property
    def name(self) -> str:
        return self._label

    def _step(self, kind: str, state: Any) -> dict[str, Any]:
        self.log.append((f"{self._label}.{kind}", (state.get("note"), tuple(state.get("trail", ())))))
        update: dict[str, Any] = {"note": f"{self._label}:{kind}", "trail": [f"{self._label}.{kind}"]}
        if kind == "after_model":
            update["messages"] = [AIMessage(f"{self._label} saw {len(state['messages'])}")]
        if self.jump and kind == "before_model":
            update["jump_to"] = "end"
        return update

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("before_agent", state)

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("before_agent", state)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("before_model", state)

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("before_model", state)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("after_model", state)

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("after_model", state)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("after_agent", state)

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("after_agent", state)


class Splitter(AgentMiddleware):
    """An extension's hook on the before_model chain (never fused) and a wrap-only one."""

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.log = log

    def before_model(self, state: Any, runtime: Any) -> None:
        self.log.append(("splitter.before_model", (state.get("note"), tuple(state.get("trail", ())))))

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.before_model(state, runtime)


class WrapOnly(AgentMiddleware):
    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


def _graph(middleware: list[AgentMiddleware]) -> Any:
    graph = create_agent(EmbeddedChatModel(), [], middleware=middleware, checkpointer=InMemorySaver())
    return bracket_model_node(graph, middleware)


def _stacks(jump: str | None = None) -> tuple[list[Any], list[Any], list[tuple[str, Any]]]:
    log: list[tuple[str, Any]] = []
    host = [Hooks(name, log, jump=name == jump) for name in ("a", "b", "c")]
    stack = [host[0], host[1], WrapOnly(), Splitter(log), host[2]]
    return stack, host, log


def _nodes(graph: Any) -> list[str]:
    return [name for name in graph.get_graph().nodes if not name.startswith("__")]


def test_only_runs_of_host_hooks_fuse_and_extensions_split_them() -> None:
    stack, host, _ = _stacks()
    nodes = _nodes(_graph(fuse_host_node_hooks(stack, host)))
    assert sorted(nodes) == sorted(
        [
            "model",
            # WrapOnly and Splitter have no before_agent: one run (named by its chain too, as
            # the same three members fuse on three chains and middleware names are unique)
            "a+b+c_before_agent.before_agent",
            "a+b.before_model",  # Splitter's before_model splits the chain...
            "Splitter.before_model",
            # ...c's, last before the model, and the whole after_model chain run in "model"
            "a+b+c_after_agent.after_agent",
        ]
    )
    assert fuse_host_node_hooks(stack, host=[]) == stack  # nothing of the host's: unchanged


def test_stacks_of_one_shape_fuse_alike_each_over_its_own_middlewares() -> None:
    first, first_host, _ = _stacks()
    second, second_host, _ = _stacks()
    fused = [fuse_host_node_hooks(first, first_host), fuse_host_node_hooks(second, second_host)]
    for stack, result in zip((first, second), fused, strict=True):
        nodes = [m for m in result if m.name == "a+b"]
        assert [member for node in nodes for member in node._members] == stack[:2]
    renamed, renamed_host, _ = _stacks()
    renamed[0]._label = "z"  # the same classes, another name: another plan
    names = {m.name for m in fuse_host_node_hooks(renamed, renamed_host)}
    assert "z+b" in names and "a+b" not in names


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("jump", [None, "a", "b", "c"])
async def test_a_fused_graph_reads_writes_and_jumps_as_separate_nodes_do(mode: str, jump: str | None) -> None:
    results = []
    for fuse in (False, True):
        stack, host, log = _stacks(jump)
        graph = _graph(fuse_host_node_hooks(stack, host) if fuse else stack)
        config = {"configurable": {"thread_id": "t"}}
        payload = {"messages": [HumanMessage("hello", id="h1")]}
        if mode == "sync":
            final = graph.invoke(payload, config)
        else:
            final = await graph.ainvoke(payload, config)
        messages = [(type(m).__name__, m.content) for m in final["messages"]]
        results.append((log, final.get("note"), final.get("trail"), messages))
    separate, fused = results
    assert fused == separate
    log, note, trail, _ = fused
    if jump is None:
        # each hook read what the one before it wrote; the reducer kept every write
        assert ("b.before_agent", ("a:before_agent", ("a.before_agent",))) in log
        assert trail[-3:] == ["c.after_agent", "b.after_agent", "a.after_agent"]
        assert note == "a:after_agent"
    else:
        hooks = [hook for hook, _ in log]
        assert f"{jump}.before_model" in hooks
        assert not any(hook.endswith("after_model") for hook in hooks)  # the model was skipped
        if jump != "c":
            assert "c.before_model" not in hooks  # the jump left the chain


async def test_the_lead_graph_fuses_the_host_stack_and_keeps_its_answers() -> None:
    host = make_host(make_config(memory={"enabled": False}))
    request = LeadRunRequest(thread_id="t1", run_id="r1", messages=({"role": "user", "content": "hello"},))
    result = await host.run_lead(request, extensions=None, task_store=None)
    assert result.answer == "Here is my answer to: hello"
    assert result.values["title"]  # the fused after_agent run still titled the thread
    assert result.values["token_usage"]["total_tokens"] > 0  # ...and after_model counted
    (graph,) = (entry.graph for entry in host._graphs._entries.table.values())
    fused = [name for name in _nodes(graph) if "+" in name]
    # model, tools, the before_agent and after_agent runs; the model node calls the others
    assert len(fused) == 2 and len(_nodes(graph)) == 4


class _ContributesWrapOnly:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        return [MiddlewarePlacement(WrapOnly(), Placement.STANDARD)]


async def test_host_layers_that_carry_a_contributed_group_still_fuse() -> None:
    # Two wrap-only contributions fuse into one group, which the host wrap layer before
    # it carries (extensions/composition/carry.py): that layer is then a copy of the host middleware,
    # and its node hooks must still fuse with its neighbours' as the original's did.
    contributions = tuple(
        Contribution(f"ext{n}:install", f"ext{n}", n, f"{n}:ext{n}#1", _ContributesWrapOnly()) for n in range(2)
    )
    graphs = []
    for extensions in (LoadedExtensions.empty(), LoadedExtensions(middlewares=contributions)):
        host = make_host(make_config(memory={"enabled": False}))
        request = LeadRunRequest(thread_id="t1", run_id="r1", messages=({"role": "user", "content": "hello"},))
        result = await host.run_lead(request, extensions=extensions, task_store=None)
        assert result.answer == "Here is my answer to: hello"
        (graph,) = (entry.graph for entry in host._graphs._entries.table.values())
        graphs.append(graph)
    bare, contributed = graphs
    assert "MemoryMiddleware" in " ".join(_nodes(bare))
    assert sorted(_nodes(contributed)) == sorted(_nodes(bare))


class Steady(Hooks):
    """Host hooks whose before_model never jumps."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("before_model", state)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return self._step("before_model", state)


class AfterSplitter(AgentMiddleware):
    """An extension's after_model hook, last in the stack: it runs first after the model."""

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.log = log

    def after_model(self, state: Any, runtime: Any) -> None:
        self.log.append(("after_splitter.after_model", (state.get("note"), tuple(state.get("trail", ())))))

    async def aafter_model(self, state: Any, runtime: Any) -> None:
        self.after_model(state, runtime)


def _split_after(kind: type[Hooks], jump: str | None) -> tuple[list[Any], list[Any], list[tuple[str, Any]]]:
    log: list[tuple[str, Any]] = []
    host = [kind(name, log, jump=name == jump) for name in ("a", "b", "c")]
    return [host[0], host[1], WrapOnly(), host[2], AfterSplitter(log)], host, log


@pytest.mark.parametrize(
    ("kind", "jump", "in_model"),
    [
        # the after_model chain holds an extension's hook: it stays nodes, and so do the
        # before_model hooks that may jump (the edge out of "model" would not read it)...
        (Hooks, None, False),
        (Hooks, "b", False),
        # ...but hooks that cannot jump still run in the model node
        (Steady, None, True),
    ],
)
async def test_the_model_node_takes_only_hooks_whose_place_and_jumps_it_keeps(
    kind: type[Hooks], jump: str | None, in_model: bool
) -> None:
    results = []
    for fuse in (False, True):
        stack, host, log = _split_after(kind, jump)
        middleware = fuse_host_node_hooks(stack, host) if fuse else stack
        graph = _graph(middleware)
        payload = {"messages": [HumanMessage("hello", id="h1")]}
        final = await graph.ainvoke(payload, {"configurable": {"thread_id": "t"}})
        results.append((log, final.get("note"), final.get("trail"), [m.content for m in final["messages"]]))
        if fuse:
            nodes = _nodes(graph)
            assert "a+b+c_after_model.after_model" in nodes  # the extension's hook splits nothing: one run
            assert ("a+b+c_before_model.before_model" not in nodes) is in_model
            assert any(isinstance(m, ModelBracket) for m in middleware) is in_model
    separate, fused = results
    assert fused == separate


async def test_a_reused_graph_brackets_each_run_with_its_own_hooks() -> None:
    from deerflow_ext.agents.reuse import CompiledGraphs

    graphs, logs, saver = CompiledGraphs(), [], InMemorySaver()
    for run in range(2):
        stack, host, log = _stacks()
        bound = graphs.bind(
            fuse_host_node_hooks(stack, host),
            model=EmbeddedChatModel(),
            tools=(),
            system_prompt="",
            checkpointer=saver,
            compile=_graph,
        )
        assert bound is not None
        await bound.ainvoke({"messages": [HumanMessage(f"hello {run}")]}, {"configurable": {"thread_id": f"t{run}"}})
        logs.append(log)
    assert len(graphs) == 1  # one shape, one compiled graph
    for log in logs:  # each run's own members were called, once each, in the model node too
        hooks = [hook for hook, _ in log]
        assert hooks.count("c.before_model") == 1 and hooks.count("a.after_model") == 1


async def test_a_model_node_that_cannot_be_bracketed_leaves_the_hooks_on_their_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deerflow_ext.agents import node_fusion

    assert node_fusion._model_node_bracketable()  # this LangChain's: see test_private_surface.py
    monkeypatch.setattr(node_fusion, "_model_node_bracketable", lambda: False)
    monkeypatch.setattr(node_fusion, "_plans", Memo(limit=64))  # plans made with the real answer are not used
    stack, host, log = _stacks()
    middleware = fuse_host_node_hooks(stack, host)
    assert not any(isinstance(m, ModelBracket) for m in middleware)
    graph = _graph(middleware)
    assert {"c.before_model", "a+b+c_after_model.after_model"} <= set(_nodes(graph))
    await graph.ainvoke({"messages": [HumanMessage("hello", id="h1")]}, {"configurable": {"thread_id": "t"}})
    assert [hook for hook, _ in log].count("a.after_model") == 1
