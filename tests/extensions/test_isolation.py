"""IsolatedMiddleware under a real ``create_agent`` graph: fail open, never call twice."""

from __future__ import annotations

import asyncio
from typing import Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.composition.hooks import implemented_hooks
from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware
from extensions.isolation_helpers import (
    EXT,
    call_echo,
    echo,
    isolate,
    run,
    scripted,
    tool_runs,
)


class Boom(RuntimeError):
    pass


# -- extension middlewares ----------------------------------------------------------------
class ModelBeforeHandler(AgentMiddleware):
    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise Boom("before handler")

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise Boom("before handler")


class ModelAfterHandler(AgentMiddleware):
    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        handler(request)
        raise Boom("after handler")

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        await handler(request)
        raise Boom("after handler")


class ToolBeforeHandler(AgentMiddleware):
    def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise Boom("tool before")

    async def awrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise Boom("tool before")


class ToolAfterHandler(AgentMiddleware):
    def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        handler(request)
        raise Boom("tool after")

    async def awrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        await handler(request)
        raise Boom("tool after")


class SyncOnlyModelObserver(AgentMiddleware):
    def __init__(self) -> None:
        self.seen = 0

    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.seen += 1
        return handler(request)


class AsyncOnlyModelObserver(AgentMiddleware):
    def __init__(self) -> None:
        self.seen = 0

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.seen += 1
        return await handler(request)


class SyncOnlyRaisingTool(AgentMiddleware):
    def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        result = handler(request)
        raise Boom("sync-only tool after")
        return result  # pragma: no cover


class AsyncOnlyRaisingModel(AgentMiddleware):
    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise Boom("async-only before")


class RaisingNodeHooks(AgentMiddleware):
    def before_model(self, state, runtime):  # type: ignore[no-untyped-def]
        raise Boom("before_model")

    def after_model(self, state, runtime):  # type: ignore[no-untyped-def]
        raise Boom("after_model")

    async def aafter_model(self, state, runtime):  # type: ignore[no-untyped-def]
        raise Boom("aafter_model")


class GarbageResult(AgentMiddleware):
    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return "not a response"

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return "not a response"


# -- fail open without repeating the downstream call ----------------------------------------
MODEL_CASES = [(ModelBeforeHandler, "before handler"), (ModelAfterHandler, "after handler")]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("cls", "text"), MODEL_CASES)
async def test_model_wrapper_failure_calls_model_exactly_once(
    mode: str, cls: type[AgentMiddleware], text: str, diagnostics: DiagnosticsList
) -> None:
    model = scripted(AIMessage("the answer"))
    agent = create_agent(model, middleware=[isolate(cls(), diagnostics)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == "the answer"
    assert len(model.calls) == 1
    (diag,) = diagnostics.for_extension(EXT)
    assert diag.phase == "middleware"
    assert diag.error_type == "Boom"
    hook = "wrap_model_call" if mode == "sync" else "awrap_model_call"
    assert diag.message == f"{cls.__name__}.{hook} raised Boom: {text}"


TOOL_CASES = [ToolBeforeHandler, ToolAfterHandler]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("cls", TOOL_CASES)
async def test_tool_wrapper_failure_runs_tool_exactly_once(
    mode: str, cls: type[AgentMiddleware], diagnostics: DiagnosticsList
) -> None:
    model = scripted(call_echo(), AIMessage("finished"))
    agent = create_agent(model, tools=[echo], middleware=[isolate(cls(), diagnostics)])

    result = await run(agent, mode)

    assert tool_runs == ["hi"]
    assert len(model.calls) == 2
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == ["echo: hi"]
    assert result["messages"][-1].content == "finished"
    assert [d.extension for d in diagnostics] == [EXT]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_one_sided_wrappers_get_a_pass_through(mode: str, diagnostics: DiagnosticsList) -> None:
    sync_only, async_only = SyncOnlyModelObserver(), AsyncOnlyModelObserver()
    model = scripted(AIMessage("ok"))
    agent = create_agent(model, middleware=[isolate(sync_only, diagnostics), isolate(async_only, diagnostics)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == "ok"
    assert len(model.calls) == 1
    # Each extension observes only the path it implements; neither path breaks.
    assert (sync_only.seen, async_only.seen) == ((1, 0) if mode == "sync" else (0, 1))
    assert len(diagnostics) == 0


def test_without_the_wrapper_a_one_sided_middleware_breaks_the_other_path() -> None:
    # The reason the pass-through exists: LangChain puts a sync-only wrapper in the async chain.
    agent = create_agent(scripted(), middleware=[SyncOnlyModelObserver()])
    import asyncio

    with pytest.raises(NotImplementedError):
        asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "x"}]}))


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_one_sided_raising_middleware_fails_open_on_its_own_path(mode: str, diagnostics: DiagnosticsList) -> None:
    model = scripted(call_echo(), AIMessage("finished"))
    agent = create_agent(
        model,
        tools=[echo],
        middleware=[
            isolate(SyncOnlyRaisingTool(), diagnostics),
            isolate(AsyncOnlyRaisingModel(), diagnostics),
        ],
    )

    result = await run(agent, mode)

    assert result["messages"][-1].content == "finished"
    assert tool_runs == ["hi"]
    assert len(model.calls) == 2
    messages = {d.message for d in diagnostics.for_extension(EXT)}
    if mode == "sync":
        assert messages == {"SyncOnlyRaisingTool.wrap_tool_call raised Boom: sync-only tool after"}
    else:
        # Two model calls, each failing open before the handler.
        assert messages == {"AsyncOnlyRaisingModel.awrap_model_call raised Boom: async-only before"}
        assert len(diagnostics) == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_node_hook_failure_is_a_diagnostic_and_no_update(mode: str, diagnostics: DiagnosticsList) -> None:
    model = scripted(AIMessage("ok"))
    inner = RaisingNodeHooks()
    agent = create_agent(model, middleware=[isolate(inner, diagnostics)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == "ok"
    assert len(model.calls) == 1
    messages = [d.message for d in diagnostics]
    after = "after_model" if mode == "sync" else "aafter_model"
    assert messages == [
        "RaisingNodeHooks.before_model raised Boom: before_model",
        f"RaisingNodeHooks.{after} raised Boom: {after}",
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_downstream_model_error_propagates_unchanged(mode: str, diagnostics: DiagnosticsList) -> None:
    failure = ConnectionError("provider down")
    model = scripted(fail_with=failure)
    agent = create_agent(
        model,
        middleware=[isolate(ModelAfterHandler(), diagnostics), isolate(SyncOnlyModelObserver(), diagnostics)],
    )

    with pytest.raises(ConnectionError) as caught:
        await run(agent, mode)

    assert caught.value is failure
    assert len(model.calls) == 1
    assert len(diagnostics) == 0


class TranslatesErrors(AgentMiddleware):
    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        try:
            return handler(request)
        except ConnectionError as exc:
            raise ValueError("extension bug while handling") from exc


def test_extension_raising_over_a_downstream_failure_surfaces_the_downstream_failure(
    diagnostics: DiagnosticsList,
) -> None:
    failure = ConnectionError("provider down")
    model = scripted(fail_with=failure)
    agent = create_agent(model, middleware=[isolate(TranslatesErrors(), diagnostics)])

    with pytest.raises(ConnectionError) as caught:
        agent.invoke({"messages": [{"role": "user", "content": "x"}]})

    assert caught.value is failure
    assert len(model.calls) == 1
    assert [d.error_type for d in diagnostics] == ["ValueError"]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_result_made_up_without_the_call_is_replaced_by_the_real_call(
    mode: str, diagnostics: DiagnosticsList
) -> None:
    model = scripted(AIMessage("real"))
    agent = create_agent(model, middleware=[isolate(GarbageResult(), diagnostics)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == "real"
    assert len(model.calls) == 1
    (diag,) = diagnostics
    assert diag.message.startswith("GarbageResult.")
    assert "did not call its handler; the host called it" in diag.message


# -- the wrapper looks exactly like the inner middleware -------------------------------------
class Notes(AgentState):  # type: ignore[type-arg]
    notes: NotRequired[list[str]]


@tool
def remember(note: str) -> str:
    """Remember a note."""
    return f"noted {note}"


class WithToolsAndState(AgentMiddleware):
    state_schema = Notes
    tools = [remember]

    def after_model(self, state, runtime):  # type: ignore[no-untyped-def]
        return {"notes": [*state.get("notes", []), f"turn{len(state['messages'])}"]}


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_tools_and_state_schema_work_through_the_wrapper(mode: str, diagnostics: DiagnosticsList) -> None:
    inner = WithToolsAndState()
    model = scripted(
        AIMessage("", tool_calls=[{"name": "remember", "args": {"note": "n1"}, "id": "r1"}]), AIMessage("bye")
    )
    wrapped = isolate(inner, diagnostics)
    agent = create_agent(model, middleware=[wrapped])

    result = await run(agent, mode)

    assert wrapped.tools == [remember]
    assert wrapped.state_schema is Notes
    assert [m.content for m in result["messages"] if isinstance(m, ToolMessage)] == ["noted n1"]
    assert result["notes"] == ["turn2", "turn4"]
    assert len(diagnostics) == 0


def test_exactly_the_inner_hooks_are_exposed() -> None:
    for cls, expected in [
        (RaisingNodeHooks, {"before_model", "after_model", "aafter_model"}),
        (SyncOnlyModelObserver, {"wrap_model_call", "awrap_model_call"}),
        (AsyncOnlyModelObserver, {"wrap_model_call", "awrap_model_call"}),
        (ToolBeforeHandler, {"wrap_tool_call", "awrap_tool_call"}),
        (WithToolsAndState, {"after_model"}),
    ]:
        wrapped = IsolatedMiddleware(cls(), extension=EXT, diagnostics=DiagnosticsList())
        assert type(wrapped) is not IsolatedMiddleware
        assert isinstance(wrapped, IsolatedMiddleware)
        assert implemented_hooks(type(wrapped)) == expected, cls
    assert implemented_hooks(IsolatedMiddleware) == frozenset()


def test_graph_nodes_match_the_inner_middleware() -> None:
    plain = create_agent(scripted(), middleware=[RaisingNodeHooks()])
    wrapped = create_agent(
        scripted(), middleware=[IsolatedMiddleware(RaisingNodeHooks(), extension=EXT, diagnostics=DiagnosticsList())]
    )
    suffixes = lambda graph: sorted(n.split(".", 1)[1] for n in graph.get_graph().nodes if "." in n)  # noqa: E731
    assert suffixes(plain) == suffixes(wrapped) == ["after_model", "before_model"]


class Jumper(AgentMiddleware):
    @hook_config(can_jump_to=["end"])
    def before_model(self, state, runtime):  # type: ignore[no-untyped-def]
        return {"jump_to": "end"}


def test_jump_targets_survive_the_wrapper(diagnostics: DiagnosticsList) -> None:
    model = scripted()
    agent = create_agent(model, middleware=[isolate(Jumper(), diagnostics)])
    agent.invoke({"messages": [{"role": "user", "content": "x"}]})
    assert model.calls == []


def test_node_names_are_unique_valid_and_attributed(diagnostics: DiagnosticsList) -> None:
    first, second = isolate(RaisingNodeHooks(), diagnostics, 1), isolate(RaisingNodeHooks(), diagnostics, 2)
    assert first.name == "ext_acme_audit_install_RaisingNodeHooks_1"
    assert second.name == "ext_acme_audit_install_RaisingNodeHooks_2"
    agent = create_agent(scripted(AIMessage("ok")), middleware=[first, second])
    assert agent.invoke({"messages": [{"role": "user", "content": "x"}]})["messages"][-1].content == "ok"
    assert first.inner.__class__ is RaisingNodeHooks and first.extension == EXT


def test_only_middleware_can_be_isolated() -> None:
    with pytest.raises(TypeError, match="expected an AgentMiddleware"):
        IsolatedMiddleware(object(), extension=EXT, diagnostics=DiagnosticsList())  # type: ignore[arg-type]
    inner = IsolatedMiddleware(Jumper(), extension=EXT, diagnostics=DiagnosticsList())
    with pytest.raises(TypeError, match="already isolated"):
        IsolatedMiddleware(inner, extension=EXT, diagnostics=DiagnosticsList())


def test_failures_are_recorded_in_the_list_the_wrapper_was_given_and_there_is_no_default() -> None:
    live = DiagnosticsList()
    model = scripted(AIMessage("ok"))
    create_agent(model, middleware=[IsolatedMiddleware(ModelBeforeHandler(), extension=EXT, diagnostics=live)]).invoke(
        {"messages": [{"role": "user", "content": "x"}]}
    )
    assert [d.extension for d in live] == [EXT]
    with pytest.raises(TypeError, match="diagnostics"):
        IsolatedMiddleware(ModelBeforeHandler(), extension=EXT)  # type: ignore[call-arg]


def _stream_factory(scope: tuple[str, ...]) -> Any:
    raise AssertionError("only registered, never run here")


class WithTransformers(AgentMiddleware):
    transformers = (_stream_factory,)

    def before_model(self, state, runtime):  # type: ignore[no-untyped-def]
        return None


def test_stream_transformers_reach_the_compiled_graph_through_the_wrapper() -> None:
    wrapped = IsolatedMiddleware(WithTransformers(), extension=EXT, diagnostics=DiagnosticsList())
    assert wrapped.transformers == (_stream_factory,)
    graph = create_agent(scripted(), middleware=[wrapped])
    assert _stream_factory in graph.stream_transformers


# -- CancelledError is judged by its origin (spec, Cancellation) ----------------------------
class OwnCancelBeforeHandler(AgentMiddleware):
    """An extension whose internal timeout (built on cancellation) lets CancelledError out."""

    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise asyncio.CancelledError("own timeout")

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise asyncio.CancelledError("own timeout")


class OwnCancelAfterHandler(AgentMiddleware):
    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        handler(request)
        raise asyncio.CancelledError("own timeout")

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        await handler(request)
        raise asyncio.CancelledError("own timeout")


class OwnCancelNodeHooks(AgentMiddleware):
    def before_model(self, state, runtime):  # type: ignore[no-untyped-def]
        raise asyncio.CancelledError("before_model")

    async def abefore_model(self, state, runtime):  # type: ignore[no-untyped-def]
        raise asyncio.CancelledError("abefore_model")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("cls", [OwnCancelBeforeHandler, OwnCancelAfterHandler])
async def test_an_extensions_own_cancelled_error_fails_open_calling_the_model_once(
    mode: str, cls: type[AgentMiddleware], diagnostics: DiagnosticsList
) -> None:
    model = scripted(AIMessage("the answer"))
    agent = create_agent(model, middleware=[isolate(cls(), diagnostics)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == "the answer"
    assert len(model.calls) == 1
    (diag,) = diagnostics.for_extension(EXT)
    hook = "wrap_model_call" if mode == "sync" else "awrap_model_call"
    assert diag.error_type == "CancelledError"
    assert diag.message == f"{cls.__name__}.{hook} raised CancelledError: own timeout"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_extensions_own_cancelled_error_in_a_node_hook_fails_open(
    mode: str, diagnostics: DiagnosticsList
) -> None:
    model = scripted(AIMessage("ok"))
    agent = create_agent(model, middleware=[isolate(OwnCancelNodeHooks(), diagnostics)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == "ok"
    hook = "before_model" if mode == "sync" else "abefore_model"
    assert [d.message for d in diagnostics] == [f"OwnCancelNodeHooks.{hook} raised CancelledError: {hook}"]


class Sleeps(AgentMiddleware):
    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.entered.set()
        await asyncio.sleep(3600)  # the host cancels the run here
        return await handler(request)

    async def abefore_model(self, state, runtime):  # type: ignore[no-untyped-def]
        self.entered.set()
        await asyncio.sleep(3600)


async def _cancel_while_inside(call: Any, inner: Sleeps) -> None:
    task = asyncio.ensure_future(call)
    await asyncio.wait_for(inner.entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancellation_of_the_run_propagates_through_a_wrap_hook(diagnostics: DiagnosticsList) -> None:
    inner = Sleeps()
    wrapped = isolate(inner, diagnostics)
    handled: list[Any] = []

    async def handler(request: Any) -> Any:
        handled.append(request)
        return AIMessage("x")

    await _cancel_while_inside(wrapped.awrap_model_call("request", handler), inner)
    assert handled == []  # no fail-open call after a real cancellation
    assert len(diagnostics) == 0


async def test_a_cancellation_of_the_run_propagates_through_a_node_hook(diagnostics: DiagnosticsList) -> None:
    inner = Sleeps()
    wrapped = isolate(inner, diagnostics)
    await _cancel_while_inside(wrapped.abefore_model({}, None), inner)
    assert len(diagnostics) == 0


async def test_a_cancellation_of_the_whole_agent_run_propagates(diagnostics: DiagnosticsList) -> None:
    model = scripted(AIMessage("never"))
    inner = Sleeps()
    agent = create_agent(model, middleware=[isolate(inner, diagnostics)])
    await _cancel_while_inside(run(agent, "async"), inner)
    assert model.calls == [] and len(diagnostics) == 0


async def test_a_downstream_cancelled_error_propagates_unchanged(diagnostics: DiagnosticsList) -> None:
    # The handler's own failure is never the extension's, CancelledError included.
    failure = asyncio.CancelledError("downstream")
    wrapped = isolate(OwnCancelAfterHandler(), diagnostics)

    async def handler(request: Any) -> Any:
        raise failure

    with pytest.raises(asyncio.CancelledError) as caught:
        await wrapped.awrap_model_call("request", handler)
    assert caught.value is failure
    assert len(diagnostics) == 0


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
async def test_keyboard_interrupt_and_system_exit_are_the_extensions_failure(
    exc: type[BaseException], diagnostics: DiagnosticsList
) -> None:
    # Raised in a task LangGraph runs a node in, either would leave the event loop and end the
    # Gateway (extensions/boundary/exits.py): contained, attributed, and the model call still happens once.
    class Raises(AgentMiddleware):
        async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
            raise exc()

    calls: list[Any] = []

    async def handler(request: Any) -> Any:
        calls.append(request)
        return AIMessage("x")

    result = await isolate(Raises(), diagnostics).awrap_model_call("request", handler)
    assert result.content == "x" and calls == ["request"]
    assert [d.error_type for d in diagnostics] == [exc.__name__]


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
async def test_a_downstream_keyboard_interrupt_or_system_exit_propagates_unchanged(
    exc: type[BaseException], diagnostics: DiagnosticsList
) -> None:
    # Not the extension's: the run's own boundary (the run worker) decides what it means.
    failure = exc()

    class PassesThrough(AgentMiddleware):
        async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
            return await handler(request)

    async def handler(request: Any) -> Any:
        raise failure

    with pytest.raises(exc) as caught:
        await isolate(PassesThrough(), diagnostics).awrap_model_call("request", handler)
    assert caught.value is failure and len(diagnostics) == 0


# -- fused runs (composition hands a run of wrap-only wrappers to LangChain as one layer) ----
class WrapsModel(AgentMiddleware):
    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return handler(request)


class ToolsPropertyRaises(WrapsModel):
    @property
    def tools(self):  # type: ignore[no-untyped-def, override]
        raise RuntimeError("tools broke")


def test_fusing_builds_new_wrappers_and_asks_the_extension_nothing_again(diagnostics: DiagnosticsList) -> None:
    from deerflow_ext.extensions.composition.wrap_fusion import fuse_wrap_only_runs

    originals = [
        IsolatedMiddleware(WrapsModel(), extension=EXT, index=1, diagnostics=diagnostics),
        IsolatedMiddleware(ToolsPropertyRaises(), extension="other:install", diagnostics=diagnostics),
    ]
    assert len(diagnostics) == 1  # the raising property, mirrored once at construction
    classes_before = [type(mw) for mw in originals]

    fused = fuse_wrap_only_runs(originals)

    assert len(diagnostics) == 1  # not mirrored again
    assert [type(mw) for mw in originals] == classes_before  # the caller's wrappers are untouched
    head, member = fused
    assert head.fused_group == (head, member) and member.fused_group == ()
    assert (head.inner, member.inner) == (originals[0].inner, originals[1].inner)
    assert (head.extension, member.extension, head.name) == (EXT, "other:install", originals[0].name)
    assert implemented_hooks(type(head)) == {"wrap_model_call", "awrap_model_call"}
    assert implemented_hooks(type(member)) == frozenset()  # LangChain builds no layer for it
    assert head.wrapped_hooks == member.wrapped_hooks == {"wrap_model_call"}
    # A single wrapper, or wrappers with node hooks, are left as they are.
    assert fuse_wrap_only_runs(originals[:1]) == originals[:1]
    node = IsolatedMiddleware(RaisingNodeHooks(), extension=EXT, diagnostics=diagnostics)
    assert fuse_wrap_only_runs([node, originals[0]]) == [node, originals[0]]


def test_isolate_makes_the_wrapper_the_class_would(diagnostics: DiagnosticsList) -> None:
    """Composition's shortcut (no second round of checks) makes the very same wrapper."""
    from deerflow_ext.extensions.composition.isolation import isolate
    from deerflow_extension_api import Placement

    inner = WrapsModel()
    options: dict[str, Any] = {
        "extension": EXT,
        "index": 2,
        "diagnostics": diagnostics,
        "placement": Placement.MODEL_PHYSICAL,
        "intercept": True,
    }
    made, built = isolate(inner, **options), IsolatedMiddleware(inner, **options)
    assert type(made) is type(built)
    assert vars(made) == vars(built)
    assert made.name == "ext_acme_audit_install_WrapsModel_2"
    assert (made.intercepts, made.placement) == (True, Placement.MODEL_PHYSICAL)
