"""One compiled graph per construction shape, each run through its own middleware and model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_helpers import make_config, make_host
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import HumanMessage

from deerflow_ext.agents.embedded_model import EmbeddedChatModel
from deerflow_ext.agents.host import LeadRunRequest
from deerflow_ext.agents.reuse import SLOTS_KEY, CompiledGraphs
from deerflow_ext.agents.tools import builtin_tools
from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_extension_api import AgentBuildContext, ExtensionData, MiddlewarePlacement, Placement


class Seen(AgentMiddleware):
    """Records, on this instance, the run of every hook call it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[tuple[str, Any]] = []

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.runs.append(("before_model", runtime.context.get("run_id")))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        self.runs.append(("model", request.runtime.context.get("run_id")))
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.runs.append(("tool", request.runtime.context.get("run_id")))
        return await handler(request)


class Contributes:
    """A fresh ``Seen`` per construction, as real contributors do."""

    def __init__(self) -> None:
        self.made: list[Seen] = []

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> list[MiddlewarePlacement]:
        self.made.append(Seen())
        return [MiddlewarePlacement(self.made[-1], Placement.STANDARD)]


def _extensions(contributor: Any) -> LoadedExtensions:
    return LoadedExtensions(
        middlewares=(Contribution("seen_ext:install", "seen", 0, "0:seen_ext#0", contributor),),
        loaded=("seen_ext:install",),
        total=1,
    )


def _request(text: str, run_id: str) -> LeadRunRequest:
    return LeadRunRequest(thread_id=f"t-{run_id}", run_id=run_id, messages=({"role": "user", "content": text},))


async def test_runs_of_one_shape_share_a_graph_and_each_reaches_only_its_own_middleware() -> None:
    contributor = Contributes()
    host = make_host(make_config(memory={"enabled": False}, title={"enabled": False}))
    ext = _extensions(contributor)
    prompts = ["hello", 'use calculator {"expression": "2+3"}', "hello again"]
    answers = [
        (await host.run_lead(_request(prompt, f"run-{n}"), extensions=ext, task_store=None)).answer
        for n, prompt in enumerate(prompts)
    ]
    assert answers == [
        "Here is my answer to: hello",
        "Done. calculator returned: 5",
        "Here is my answer to: hello again",
    ]
    assert len(host._graphs) == 1  # compiled once, for three constructions
    assert len(contributor.made) == 3  # ...each of which contributed afresh
    for n, seen in enumerate(contributor.made):
        assert {run for _, run in seen.runs} == {f"run-{n}"}
    assert ("tool", "run-1") in contributor.made[1].runs


async def test_concurrent_runs_on_a_shared_graph_stay_apart() -> None:
    contributor = Contributes()
    host = make_host(make_config(memory={"enabled": False}, title={"enabled": False}))
    ext = _extensions(contributor)
    await host.run_lead(_request("warm", "warm"), extensions=ext, task_store=None)
    await asyncio.gather(
        *(host.run_lead(_request(f"hello {n}", f"run-{n}"), extensions=ext, task_store=None) for n in range(6))
    )
    assert len(host._graphs) == 1
    owners = {seen.runs[0][1]: {run for _, run in seen.runs} for seen in contributor.made}
    assert owners == {run: {run} for run in ["warm", *(f"run-{n}" for n in range(6))]}


async def test_each_run_is_answered_by_the_model_its_construction_made() -> None:
    made: list[EmbeddedChatModel] = []

    def factory(name: str | None) -> EmbeddedChatModel:
        made.append(EmbeddedChatModel())
        return made[-1]

    host = make_host(make_config(memory={"enabled": False}, title={"enabled": False}), model_factory=factory)
    for n in range(3):
        await host.run_lead(_request("hello", f"run-{n}"), extensions=LoadedExtensions(), task_store=None)
    assert len(host._graphs) == 1
    assert [m.calls for m in made] == [1, 1, 1]


async def test_a_construction_of_another_shape_compiles_its_own_graph() -> None:
    class Sometimes(Contributes):
        def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> list[Any]:
            return super().contribute_middlewares(app_store, ctx) if len(self.made) % 2 == 0 else self._skip()

        def _skip(self) -> list[Any]:
            self.made.append(Seen())  # counted, not contributed
            return []

    contributor = Sometimes()
    host = make_host(make_config(memory={"enabled": False}, title={"enabled": False}))
    for n in range(4):
        await host.run_lead(_request("hello", f"run-{n}"), extensions=_extensions(contributor), task_store=None)
    assert len(host._graphs) == 2
    assert [bool(seen.runs) for seen in contributor.made] == [True, False, True, False]


class Jumper(AgentMiddleware):
    """Ends the agent before the model when told to: a conditional edge of the graph."""

    def __init__(self, jump: bool) -> None:
        super().__init__()
        self.jump = jump

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return {"jump_to": "end"} if self.jump else None


class PassThrough(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


def _bind(graphs: CompiledGraphs, stack: list[AgentMiddleware], model: EmbeddedChatModel) -> Any:
    tools = builtin_tools()
    return graphs.bind(
        stack,
        model=model,
        tools=tools,
        system_prompt="be brief",
        checkpointer=None,
        compile=lambda middleware: create_agent(model, tools, system_prompt="be brief", middleware=middleware),
    )


async def test_jumps_and_per_run_decisions_survive_the_shared_graph() -> None:
    graphs = CompiledGraphs()
    first_model, second_model = EmbeddedChatModel(), EmbeddedChatModel()
    first = _bind(graphs, [PassThrough(), Jumper(jump=False)], first_model)
    second = _bind(graphs, [PassThrough(), Jumper(jump=True)], second_model)
    assert first.graph is second.graph
    answered = await first.ainvoke({"messages": [HumanMessage("hi")]})
    ended = await second.ainvoke({"messages": [HumanMessage("hi")]})
    assert len(answered["messages"]) == 2 and first_model.calls == 1
    assert len(ended["messages"]) == 1 and second_model.calls == 0


def test_a_middleware_whose_hook_takes_other_parameters_is_compiled_as_it_is() -> None:
    class Unusual(PassThrough):
        async def abefore_model(self, state: Any, runtime: Any, extra: Any = None) -> None:
            return None

    graphs = CompiledGraphs()
    assert _bind(graphs, [Unusual()], EmbeddedChatModel()) is None
    assert len(graphs) == 0


def test_a_stack_nothing_in_which_wraps_model_calls_is_compiled_as_it_is() -> None:
    assert _bind(CompiledGraphs(), [Jumper(jump=False)], EmbeddedChatModel()) is None


async def test_the_shared_graph_refuses_a_run_without_its_stack() -> None:
    bound = _bind(CompiledGraphs(), [PassThrough()], EmbeddedChatModel())
    with pytest.raises(RuntimeError, match="without its construction's stack"):
        await bound.graph.ainvoke({"messages": [HumanMessage("hi")]}, context={})
    context: dict[str, Any] = {"run_id": "r"}
    await bound.ainvoke({"messages": [HumanMessage("hi")]}, context=context)
    assert context[SLOTS_KEY] is bound.run_stack  # bound into the caller's own context


def test_the_cache_is_bounded_by_the_one_eviction_rule() -> None:
    graphs = CompiledGraphs(maxsize=2)
    sizes = []
    for name in ("a", "b", "c"):
        named = type(f"Named{name}", (PassThrough,), {})
        assert _bind(graphs, [named()], EmbeddedChatModel()) is not None
        sizes.append(len(graphs))
    assert sizes == [1, 2, 1]  # a third shape found it full: it started over (memo.py)


def _structure(graph: Any) -> tuple[Any, ...]:
    drawn = graph.get_graph()
    edges = sorted((e.source, e.target, e.conditional) for e in drawn.edges)
    schemas = sorted((schema.__name__, tuple(sorted(schema.__annotations__))) for schema in graph.builder.schemas)
    return tuple(sorted(drawn.nodes)), tuple(edges), tuple(sorted(graph.channels)), tuple(schemas)


def test_the_shared_graph_has_the_structure_the_runs_own_stack_would_compile_to() -> None:
    """The shape key names what ``create_agent`` reads at compile time; should LangChain read
    more (or differently), the two graphs part and this fails, naming the difference."""
    from agent_helpers import Recorder, recording_extensions

    from deerflow_ext.agents.lead import make_lead_agent

    class Jumps(Contributes):
        def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> list[Any]:
            return [
                *super().contribute_middlewares(app_store, ctx),
                MiddlewarePlacement(Jumper(jump=False), Placement.STANDARD),
                MiddlewarePlacement(PassThrough(), Placement.MODEL_LOGICAL),
            ]

    recorded = recording_extensions(Recorder())
    ext = LoadedExtensions(
        middlewares=(*_extensions(Jumps()).middlewares, *recorded.middlewares),
        task_lifecycle=recorded.task_lifecycle,
        loaded=("seen_ext:install",),
        total=1,
    )
    config = make_config()
    shared = make_lead_agent(config, extensions=ext, graphs=CompiledGraphs())
    own = make_lead_agent(config, extensions=ext)
    assert _structure(shared.graph) == _structure(own)


async def test_the_slot_that_hands_on_the_model_passes_tool_calls_through_unchanged() -> None:
    class Both(PassThrough):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    bound = _bind(CompiledGraphs(), [Both()], EmbeddedChatModel())
    state = await bound.ainvoke({"messages": [HumanMessage('use calculator {"expression": "2+3"}')]})
    assert state["messages"][-1].content == "Done. calculator returned: 5"
