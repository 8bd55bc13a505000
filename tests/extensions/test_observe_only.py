"""Observe-only wrap hooks (DeerFlow's guarantee) and the operator's ``intercept: true`` opt-in.

Under a real ``create_agent`` graph, on both the sync and the async path, with a model and a
tool that count their calls: each of the five ways a wrap hook can try to decide instead of
observe (rewrite the request, skip the handler, replace the result, call the handler twice,
swallow its failure) leaves the call exactly as it would have been without the extension,
and is one attributed diagnostic line. An intercepting middleware decides, and fails closed.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.composition.handler_watch import RepeatedHandlerCall
from extensions.isolation_helpers import EXT, call_echo, echo, isolate, run, scripted, tool_runs

MODES = ["sync", "async"]


class Boom(RuntimeError):
    pass


def both_sides(cls: type[AgentMiddleware]) -> type[AgentMiddleware]:
    """Give ``cls`` the async twin of each sync wrap hook, built from the same behaviour:
    ``behave(request, call)`` where ``call`` runs the handler on either path."""

    def model(self: Any, request: Any, handler: Any) -> Any:
        return self.behave(request, handler)

    async def amodel(self: Any, request: Any, handler: Any) -> Any:
        return await self.abehave(request, handler)

    if hasattr(cls, "behave"):
        cls.wrap_model_call = model  # type: ignore[attr-defined]
        cls.awrap_model_call = amodel  # type: ignore[attr-defined]
    if hasattr(cls, "behave_tool"):

        def tool(self: Any, request: Any, handler: Any) -> Any:
            return self.behave_tool(request, handler)

        async def atool(self: Any, request: Any, handler: Any) -> Any:
            return await self.abehave_tool(request, handler)

        cls.wrap_tool_call = tool  # type: ignore[attr-defined]
        cls.awrap_tool_call = atool  # type: ignore[attr-defined]
    return cls


FAKE = ModelResponse(result=[AIMessage("made up by the extension")])


@both_sides
class RewritesRequest(AgentMiddleware):
    def behave(self, request: Any, handler: Any) -> Any:
        return handler(request.override(messages=[HumanMessage("rewritten")] * 3))

    async def abehave(self, request: Any, handler: Any) -> Any:
        return await handler(request.override(messages=[HumanMessage("rewritten")] * 3))

    def behave_tool(self, request: Any, handler: Any) -> Any:
        return handler(request.override(tool_call={**request.tool_call, "args": {"text": "evil"}}))

    async def abehave_tool(self, request: Any, handler: Any) -> Any:
        return await handler(request.override(tool_call={**request.tool_call, "args": {"text": "evil"}}))


@both_sides
class SkipsHandler(AgentMiddleware):
    def behave(self, request: Any, handler: Any) -> Any:
        return FAKE

    async def abehave(self, request: Any, handler: Any) -> Any:
        return FAKE

    def behave_tool(self, request: Any, handler: Any) -> Any:
        return ToolMessage("made up", tool_call_id=request.tool_call["id"])

    async def abehave_tool(self, request: Any, handler: Any) -> Any:
        return ToolMessage("made up", tool_call_id=request.tool_call["id"])


@both_sides
class ReplacesResult(AgentMiddleware):
    def behave(self, request: Any, handler: Any) -> Any:
        handler(request)
        return FAKE

    async def abehave(self, request: Any, handler: Any) -> Any:
        await handler(request)
        return FAKE

    def behave_tool(self, request: Any, handler: Any) -> Any:
        handler(request)
        return ToolMessage("made up", tool_call_id=request.tool_call["id"])

    async def abehave_tool(self, request: Any, handler: Any) -> Any:
        await handler(request)
        return ToolMessage("made up", tool_call_id=request.tool_call["id"])


@both_sides
class CallsTwice(AgentMiddleware):
    """Retries once, swallowing what the second call raises (the host's refusal)."""

    def __init__(self, let_it_propagate: bool = False) -> None:
        super().__init__()
        self.let_it_propagate = let_it_propagate
        self.refusals: list[BaseException] = []

    def behave(self, request: Any, handler: Any) -> Any:
        first = handler(request)
        try:
            return handler(request)
        except RepeatedHandlerCall as exc:
            self.refusals.append(exc)
            if self.let_it_propagate:
                raise
            return first

    async def abehave(self, request: Any, handler: Any) -> Any:
        first = await handler(request)
        try:
            return await handler(request)
        except RepeatedHandlerCall as exc:
            self.refusals.append(exc)
            if self.let_it_propagate:
                raise
            return first

    behave_tool, abehave_tool = behave, abehave


@both_sides
class SwallowsFailure(AgentMiddleware):
    def behave(self, request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except Exception:
            return FAKE

    async def abehave(self, request: Any, handler: Any) -> Any:
        try:
            return await handler(request)
        except Exception:
            return FAKE


def only_line(diagnostics: DiagnosticsList, caplog: pytest.LogCaptureFixture, cls: type) -> str:
    """The one diagnostic, which is also the one log line, naming the extension and the class."""
    (diagnostic,) = diagnostics
    lines = [r.getMessage() for r in caplog.records if r.name == "deerflow_ext.extensions"]
    assert lines == [f"Extension {EXT}: {diagnostic.message}"]
    assert diagnostic.extension == EXT and diagnostic.phase == "middleware"
    assert diagnostic.message.startswith(f"{cls.__name__}.")
    return diagnostic.message


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="deerflow_ext.extensions")


# -- the five violations, model axis ------------------------------------------------------------
MODEL_CASES = [
    # The model gets the user's one message, not the three rewritten ones.
    (RewritesRequest, "passed its handler another request; the handler ran the host's request"),
    (SkipsHandler, "did not call its handler; the host called it and used its result"),
    (ReplacesResult, "returned ModelResponse instead of its handler's result, which is used"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("cls", "ending"), MODEL_CASES, ids=["rewrite", "skip", "replace"])
async def test_the_model_call_is_the_hosts_whatever_the_extension_does(
    mode: str, cls: type[AgentMiddleware], ending: str, diagnostics: DiagnosticsList, caplog: pytest.LogCaptureFixture
) -> None:
    model = scripted(AIMessage("real"))
    agent = create_agent(model, middleware=[isolate(cls(), diagnostics)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == "real"
    assert model.calls == [1]
    assert only_line(diagnostics, caplog, cls).endswith(ending)


@pytest.mark.parametrize("let_it_propagate", [False, True], ids=["caught", "propagated"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_second_handler_call_never_reaches_the_model(
    mode: str, let_it_propagate: bool, diagnostics: DiagnosticsList, caplog: pytest.LogCaptureFixture
) -> None:
    model = scripted(AIMessage("real"))
    extension = CallsTwice(let_it_propagate)
    agent = create_agent(model, middleware=[isolate(extension, diagnostics)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == "real"
    assert model.calls == [1]
    assert len(extension.refusals) == 1
    assert only_line(diagnostics, caplog, CallsTwice).endswith("called its handler 2 times; the handler ran once")


@pytest.mark.parametrize("mode", MODES)
async def test_a_swallowed_model_failure_stays_the_graphs(
    mode: str, diagnostics: DiagnosticsList, caplog: pytest.LogCaptureFixture
) -> None:
    failure = ConnectionError("provider down")
    model = scripted(fail_with=failure)
    agent = create_agent(model, middleware=[isolate(SwallowsFailure(), diagnostics)])

    with pytest.raises(ConnectionError) as caught:
        await run(agent, mode)

    assert caught.value is failure
    assert model.calls == [1]
    message = only_line(diagnostics, caplog, SwallowsFailure)
    assert message.endswith("swallowed its handler's ConnectionError, which propagates")


# -- the same on the tool axis ------------------------------------------------------------------
TOOL_CASES = [
    (RewritesRequest, ["hi"], "echo: hi", "the handler ran the host's request"),
    (SkipsHandler, ["hi"], "echo: hi", "did not call its handler; the host called it and used its result"),
    (ReplacesResult, ["hi"], "echo: hi", "returned ToolMessage instead of its handler's result, which is used"),
    (CallsTwice, ["hi"], "echo: hi", "called its handler 2 times; the handler ran once"),
]


def tool_only(cls: type[AgentMiddleware]) -> type[AgentMiddleware]:
    """``cls`` with its model hooks taken away (LangChain then sees only the tool axis)."""
    hooks = {"wrap_model_call": AgentMiddleware.wrap_model_call, "awrap_model_call": AgentMiddleware.awrap_model_call}
    return type(cls.__name__, (cls,), hooks)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("cls", "runs", "content", "ending"), TOOL_CASES, ids=["rewrite", "skip", "replace", "twice"])
async def test_tool_calls_are_observed_never_decided(
    mode: str,
    cls: type[AgentMiddleware],
    runs: list[str],
    content: str,
    ending: str,
    diagnostics: DiagnosticsList,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = scripted(call_echo(), AIMessage("done"))
    agent = create_agent(model, tools=[echo], middleware=[isolate(tool_only(cls)(), diagnostics)])

    result = await run(agent, mode)

    assert tool_runs == runs
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == [content]
    assert only_line(diagnostics, caplog, cls).endswith(ending)


@pytest.mark.parametrize("mode", MODES)
async def test_a_well_behaved_observer_leaves_no_line(mode: str, diagnostics: DiagnosticsList) -> None:
    @both_sides
    class Watches(AgentMiddleware):
        seen = 0

        def behave(self, request: Any, handler: Any) -> Any:
            Watches.seen += 1
            return handler(request)

        async def abehave(self, request: Any, handler: Any) -> Any:
            Watches.seen += 1
            return await handler(request)

    model = scripted(AIMessage("real"))
    result = await run(create_agent(model, middleware=[isolate(Watches(), diagnostics)]), mode)

    assert result["messages"][-1].content == "real" and Watches.seen == 1
    assert len(diagnostics) == 0


# -- intercept: true ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("cls", "answer", "calls"),
    [
        (RewritesRequest, "real", [3]),
        (SkipsHandler, "made up by the extension", []),
        (ReplacesResult, "made up by the extension", [1]),
    ],
    ids=["rewrite", "short-circuit", "replace"],
)
async def test_an_intercepting_middleware_decides(
    mode: str, cls: type[AgentMiddleware], answer: str, calls: list[int], diagnostics: DiagnosticsList
) -> None:
    model = scripted(AIMessage("real"))
    agent = create_agent(model, middleware=[isolate(cls(), diagnostics, intercept=True)])

    result = await run(agent, mode)

    assert result["messages"][-1].content == answer
    assert model.calls == calls
    assert len(diagnostics) == 0


@both_sides
class DecidesThenFails(AgentMiddleware):
    def behave(self, request: Any, handler: Any) -> Any:
        raise Boom("policy backend unreachable")

    async def abehave(self, request: Any, handler: Any) -> Any:
        raise Boom("policy backend unreachable")


@pytest.mark.parametrize("mode", MODES)
async def test_an_intercepting_middleware_fails_closed_attributed(
    mode: str, diagnostics: DiagnosticsList, caplog: pytest.LogCaptureFixture
) -> None:
    model = scripted(AIMessage("real"))
    agent = create_agent(model, middleware=[isolate(DecidesThenFails(), diagnostics, intercept=True)])

    with pytest.raises(Boom, match="policy backend unreachable"):
        await run(agent, mode)

    assert model.calls == []
    assert only_line(diagnostics, caplog, DecidesThenFails).endswith(
        "raised Boom: policy backend unreachable; the run fails (intercept: true fails closed)"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_an_intercepting_middleware_with_an_unusable_result_fails_closed(
    mode: str, diagnostics: DiagnosticsList, caplog: pytest.LogCaptureFixture
) -> None:
    @both_sides
    class AnswersGarbage(AgentMiddleware):
        def behave(self, request: Any, handler: Any) -> Any:
            return "not a response"

        async def abehave(self, request: Any, handler: Any) -> Any:
            return "not a response"

    agent = create_agent(
        scripted(AIMessage("real")), middleware=[isolate(AnswersGarbage(), diagnostics, intercept=True)]
    )

    with pytest.raises(TypeError, match="not a valid"):
        await run(agent, mode)

    assert "returned str, which is not a valid" in only_line(diagnostics, caplog, AnswersGarbage)


@pytest.mark.parametrize("mode", MODES)
async def test_an_intercepting_node_hook_fails_closed(mode: str, diagnostics: DiagnosticsList) -> None:
    class Gate(AgentMiddleware):
        def before_model(self, state: Any, runtime: Any) -> Any:
            raise Boom("gate down")

        async def abefore_model(self, state: Any, runtime: Any) -> Any:
            raise Boom("gate down")

    model = scripted(AIMessage("real"))
    with pytest.raises(Boom):
        await run(create_agent(model, middleware=[isolate(Gate(), diagnostics, intercept=True)]), mode)
    assert model.calls == []
    assert [d.error_type for d in diagnostics] == ["Boom"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_downstream_failure_through_an_interceptor_is_not_blamed_on_it(
    mode: str, diagnostics: DiagnosticsList
) -> None:
    @both_sides
    class PassesThrough(AgentMiddleware):
        def behave(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def abehave(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    failure = ConnectionError("provider down")
    agent = create_agent(
        scripted(fail_with=failure), middleware=[isolate(PassesThrough(), diagnostics, intercept=True)]
    )
    with pytest.raises(ConnectionError) as caught:
        await run(agent, mode)
    assert caught.value is failure
    assert len(diagnostics) == 0


# -- the same inside a fused group, a layer of its own or carried by the host layer before it ----
class HostLayer(AgentMiddleware):
    """Stands in for a host wrap layer (not isolated), so a group can be carried by it."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


@pytest.mark.parametrize("arrangement", ["separate", "fused", "carried"])
@pytest.mark.parametrize("mode", MODES)
async def test_fused_and_carried_members_observe_only_too(
    mode: str, arrangement: str, diagnostics: DiagnosticsList
) -> None:
    from deerflow_ext.extensions.composition.carry import carry_fused_groups
    from deerflow_ext.extensions.composition.hooks import implemented_hooks
    from deerflow_ext.extensions.composition.wrap_fusion import fuse_wrap_only_runs

    members = [isolate(ReplacesResult(), diagnostics), isolate(RewritesRequest(), diagnostics, index=2)]
    stack: list[Any] = [HostLayer(), *members]
    if arrangement != "separate":
        stack = fuse_wrap_only_runs(stack)
        assert stack[1].fused_group
    if arrangement == "carried":
        stack = carry_fused_groups(stack)
        # On the model axis the group runs inside HostLayer: no contributed model layer is left.
        assert not any({"wrap_model_call", "awrap_model_call"} & implemented_hooks(type(mw)) for mw in stack[1:])
    model = scripted(AIMessage("real"))

    result = await run(create_agent(model, middleware=stack), mode)

    assert result["messages"][-1].content == "real"
    assert model.calls == [1]
    assert sorted(d.message.split(" ", 1)[1] for d in diagnostics) == [
        "passed its handler another request; the handler ran the host's request",
        "returned ModelResponse instead of its handler's result, which is used",
    ]


# -- from config.yaml to the run -----------------------------------------------------------------
@pytest.mark.parametrize(("intercept", "answer"), [(False, "real"), (True, "answered by the gate")])
async def test_the_records_intercept_flag_decides_who_answers(
    intercept: bool, answer: str, diagnostics: DiagnosticsList
) -> None:
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.extensions.composition.stack import compose_middleware_stack
    from deerflow_ext.extensions.plugin_loading.loader import load_extensions
    from deerflow_extension_api import AgentBuildContext, AgentScope

    record = {"name": "gate", "use": "extensions.isolation_helpers:install_gate", "intercept": intercept}
    extensions = load_extensions(AppConfig.model_validate({"plugins": [record]}), diagnostics=diagnostics)
    assert [c.intercept for c in extensions.middlewares] == [intercept]
    stack = compose_middleware_stack(
        [], extensions=extensions, ctx=AgentBuildContext(AgentScope.LEAD), diagnostics=diagnostics
    )
    assert [mw.intercepts for mw in stack] == [intercept]
    model = scripted(AIMessage("real"))

    result = await run(create_agent(model, middleware=stack), "async")

    assert result["messages"][-1].content == answer
    assert model.calls == ([] if intercept else [1])
    assert len(diagnostics) == (0 if intercept else 1)
