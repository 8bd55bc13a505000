"""compose_middleware_stack: placements land where they promise, under a real agent graph."""

from __future__ import annotations

import asyncio
import itertools
import operator
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.types import Command

from deerflow_ext.agents.embedded_model import TransientModelError
from deerflow_ext.agents.lead import build_host_stack
from deerflow_ext.agents.middlewares import (
    HOST_STACK_ORDER,
    ClarificationMiddleware,
    LLMErrorHandlingMiddleware,
    SandboxLeaseMiddleware,
    SubagentLimitMiddleware,
    TitleMiddleware,
)
from deerflow_ext.agents.policy import project_policy
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.composition import layers as layers_module
from deerflow_ext.extensions.composition import stack as stack_module
from deerflow_ext.extensions.composition.assembly import describe_middleware
from deerflow_ext.extensions.composition.hooks import WRAP_HOOK_PAIRS, implemented_hooks
from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware
from deerflow_ext.extensions.composition.ordering import OrderingError, assert_ordering
from deerflow_ext.extensions.composition.stack import compose_middleware_stack, host_layers
from deerflow_ext.extensions.composition.wrap_fusion import check_fused_groups
from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_ext.memo import Memo
from deerflow_extension_api import (
    AgentBuildContext,
    AgentScope,
    MiddlewarePlacement,
    Placement,
)

LEAD = AgentBuildContext(scope=AgentScope.LEAD, agent_name="lead")
SUBAGENT = AgentBuildContext(scope=AgentScope.SUBAGENT, agent_name="general")
_ids = itertools.count()


def host_stack(*, omit: tuple[type, ...] = ()) -> list[AgentMiddleware]:
    """The lead's host stack as the builder makes it (retry layer: two retries), minus ``omit``."""
    config = AppConfig()
    policy = project_policy(config, AgentScope.LEAD)
    stack = build_host_stack(config, scope=AgentScope.LEAD, model=FakeListChatModel(responses=["x"]), policy=policy)
    return [mw for mw in stack if not isinstance(mw, omit)]


class Contributor:
    def __init__(self, *placements: MiddlewarePlacement) -> None:
        self.placements = placements
        self.calls: list[tuple[Any, AgentBuildContext]] = []

    def contribute_middlewares(self, app_store: Any, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        self.calls.append((app_store, ctx))
        return self.placements


def loaded(
    *contributors: Any, names: Sequence[str] | None = None, intercepting: Sequence[int] = ()
) -> LoadedExtensions:
    """A snapshot of one entry per contributor; the entries at ``intercepting`` say ``intercept: true``."""
    names = names or [f"ext{n}:install" for n in range(len(contributors))]
    return LoadedExtensions(
        middlewares=tuple(
            Contribution(name, name.split(":")[0], n, f"{n}:{name}#1", contributor, intercept=n in intercepting)
            for n, (name, contributor) in enumerate(zip(names, contributors, strict=True))
        )
    )


def classes(stack: Sequence[Any]) -> list[str]:
    return [type(mw.inner).__name__ + "*" if isinstance(mw, IsolatedMiddleware) else type(mw).__name__ for mw in stack]


class Counter(AgentMiddleware):
    """Counts model and tool calls, and what each tool call returned or raised."""

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.model_calls = 0
        self.tool_results: list[str] = []

    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.model_calls += 1
        return handler(request)

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.model_calls += 1
        return await handler(request)

    def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        try:
            result = handler(request)
        except Exception as exc:
            self.tool_results.append(f"raised {type(exc).__name__}")
            raise
        self.tool_results.append(f"{getattr(result, 'status', '?')}")
        return result


class Plain(AgentMiddleware):
    def __init__(self, label: str = "") -> None:
        self.label = label

    def before_model(self, state, runtime):  # type: ignore[no-untyped-def]
        return None


# -- composition --------------------------------------------------------------------------
def test_no_contributors_returns_the_host_stack_without_doing_any_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def forbidden(*args: Any) -> Any:
        raise AssertionError("no work expected")

    monkeypatch.setattr(stack_module, "collect_middlewares", forbidden)
    monkeypatch.setattr(stack_module, "assert_ordering", forbidden)
    host = host_stack()
    result = compose_middleware_stack(host, extensions=LoadedExtensions(), ctx=LEAD)
    assert result == host and result is not host


def test_each_placement_lands_at_its_anchor() -> None:
    contributor = Contributor(
        MiddlewarePlacement(Plain("raw"), Placement.TOOL_RAW),
        MiddlewarePlacement(Plain("physical"), Placement.MODEL_PHYSICAL),
        MiddlewarePlacement(Plain("standard"), Placement.STANDARD),
        MiddlewarePlacement(Plain("logical"), Placement.MODEL_LOGICAL),
        MiddlewarePlacement(Plain("visible"), Placement.TOOL_VISIBLE),
    )
    ext = loaded(contributor)
    result = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD, diagnostics=DiagnosticsList())

    labels = [mw.inner.label if isinstance(mw, IsolatedMiddleware) else type(mw).__name__ for mw in result]
    assert labels == [
        "ThreadDataMiddleware",
        "SandboxLeaseMiddleware",
        "visible",
        "logical",
        "LLMErrorHandlingMiddleware",
        "ToolErrorHandlingMiddleware",
        "SummarizationMiddleware",
        "TitleMiddleware",
        "MemoryMiddleware",
        "TokenUsageMiddleware",
        "TokenBudgetMiddleware",
        "SubagentLimitMiddleware",
        "standard",
        "physical",
        "raw",
        "ClarificationMiddleware",
    ]
    assert contributor.calls == [(ext.app_store, LEAD)]
    assert all(mw.extension == "ext0:install" for mw in result if isinstance(mw, IsolatedMiddleware))


def test_standard_keeps_order_then_registration() -> None:
    first = Contributor(
        MiddlewarePlacement(Plain("a5"), Placement.STANDARD, order=5),
        MiddlewarePlacement(Plain("a-1"), Placement.STANDARD, order=-1),
        MiddlewarePlacement(Plain("a0"), Placement.STANDARD),
    )
    second = Contributor(
        MiddlewarePlacement(Plain("b5"), Placement.STANDARD, order=5),
        MiddlewarePlacement(Plain("b0"), Placement.STANDARD),
    )
    result = compose_middleware_stack(host_stack(), extensions=loaded(first, second), ctx=LEAD)
    labels = [mw.inner.label for mw in result if isinstance(mw, IsolatedMiddleware)]
    assert labels == ["a-1", "a0", "b0", "a5", "b5"]


def test_scope_filters_placements() -> None:
    contributor = Contributor(
        MiddlewarePlacement(Plain("lead"), Placement.STANDARD, scope=AgentScope.LEAD),
        MiddlewarePlacement(Plain("sub"), Placement.STANDARD, scope=AgentScope.SUBAGENT),
        MiddlewarePlacement(Plain("both"), Placement.STANDARD),
    )
    ext = loaded(contributor)
    for ctx, expected in ((LEAD, ["lead", "both"]), (SUBAGENT, ["sub", "both"])):
        result = compose_middleware_stack(host_stack(), extensions=ext, ctx=ctx)
        assert [mw.inner.label for mw in result if isinstance(mw, IsolatedMiddleware)] == expected


def test_subagent_stacks_without_some_anchors_still_compose() -> None:
    omit = (LLMErrorHandlingMiddleware, SubagentLimitMiddleware, ClarificationMiddleware, TitleMiddleware)
    contributor = Contributor(
        MiddlewarePlacement(Plain("logical"), Placement.MODEL_LOGICAL),
        MiddlewarePlacement(Plain("raw"), Placement.TOOL_RAW),
        MiddlewarePlacement(Plain("standard"), Placement.STANDARD),
    )
    result = compose_middleware_stack(host_stack(omit=omit), extensions=loaded(contributor), ctx=SUBAGENT)
    labels = [mw.inner.label if isinstance(mw, IsolatedMiddleware) else type(mw).__name__ for mw in result]
    assert labels == [
        "ThreadDataMiddleware",
        "SandboxLeaseMiddleware",
        "logical",
        "ToolErrorHandlingMiddleware",
        "SummarizationMiddleware",
        "MemoryMiddleware",
        "TokenUsageMiddleware",
        "TokenBudgetMiddleware",
        "standard",
        "raw",
    ]


def test_node_names_are_unique_per_stack() -> None:
    contributor = Contributor(
        MiddlewarePlacement(Plain(), Placement.STANDARD), MiddlewarePlacement(Plain(), Placement.TOOL_RAW)
    )
    other = Contributor(MiddlewarePlacement(Plain(), Placement.STANDARD))
    result = compose_middleware_stack(
        host_stack(),
        extensions=loaded(contributor, other, names=["acme:install", "acme.x:install"]),
        ctx=LEAD,
    )
    names = [mw.name for mw in result if isinstance(mw, IsolatedMiddleware)]
    assert names == ["ext_acme_install_Plain_1", "ext_acme_x_install_Plain_1", "ext_acme_install_Plain_2"]
    create_agent(FakeListChatModel(responses=["x"]), middleware=result)  # LangChain accepts the names


class Raises:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
        raise RuntimeError("no config")


class Returns:
    def __init__(self, value: Any) -> None:
        self.value = value

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
        return self.value


shared = Plain()
GARBAGE = [
    ("text", "returned str"),
    ({"a": 1}, "returned dict"),
    (42, "returned int"),
    ([Plain()], "Plain item"),
    ([MiddlewarePlacement(object(), Placement.STANDARD)], "object is not an AgentMiddleware"),
    ([MiddlewarePlacement(Plain(), "standard")], "is not a Placement"),  # type: ignore[arg-type]
    ([MiddlewarePlacement(Plain(), Placement.STANDARD, order="1")], "order '1'"),  # type: ignore[arg-type]
    ([MiddlewarePlacement(Plain(), Placement.STANDARD, order=True)], "order True"),
    ([MiddlewarePlacement(Plain(), Placement.STANDARD, scope="lead")], "scope 'lead'"),  # type: ignore[arg-type]
    (
        [MiddlewarePlacement(shared, Placement.STANDARD), MiddlewarePlacement(shared, Placement.TOOL_RAW)],
        "twice",
    ),
]


@pytest.mark.parametrize("contributor", [Raises(), *(Returns(value) for value, _ in GARBAGE)])
def test_a_broken_contributor_is_skipped_with_a_diagnostic(contributor: Any) -> None:
    good = Contributor(MiddlewarePlacement(Plain("good"), Placement.STANDARD))
    diagnostics = DiagnosticsList()
    result = compose_middleware_stack(
        host_stack(), extensions=loaded(contributor, good), ctx=LEAD, diagnostics=diagnostics
    )
    assert [mw.inner.label for mw in result if isinstance(mw, IsolatedMiddleware)] == ["good"]
    (diag,) = diagnostics
    assert diag.extension == "ext0:install" and diag.phase == "middleware"
    assert diag.message.startswith("contribute_middlewares raised ")
    if isinstance(contributor, Returns):
        text = next(text for value, text in GARBAGE if value is contributor.value)
        assert text in diag.message


class RaisesBase:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
        raise self.exc


def test_a_contributors_own_cancelled_error_is_contained() -> None:
    # Spec, Cancellation: a CancelledError the contributor raises itself (an internal timeout
    # built on cancellation) is a failure like any other; nothing is cancelling the host here.
    good = Contributor(MiddlewarePlacement(Plain("good"), Placement.STANDARD))
    diagnostics = DiagnosticsList()
    result = compose_middleware_stack(
        host_stack(),
        extensions=loaded(RaisesBase(asyncio.CancelledError("own timeout")), good),
        ctx=LEAD,
        diagnostics=diagnostics,
    )
    assert [mw.inner.label for mw in result if isinstance(mw, IsolatedMiddleware)] == ["good"]
    (diag,) = diagnostics
    assert diag.extension == "ext0:install" and diag.error_type == "CancelledError"
    assert diag.message.startswith("contribute_middlewares raised CancelledError: own timeout")


async def test_a_contributors_own_cancelled_error_is_contained_inside_a_task() -> None:
    diagnostics = DiagnosticsList()
    extensions = loaded(RaisesBase(asyncio.CancelledError()))
    result = await asyncio.create_task(_compose_async(extensions, diagnostics))
    assert not any(isinstance(mw, IsolatedMiddleware) for mw in result)
    assert [d.error_type for d in diagnostics] == ["CancelledError"]


async def _compose_async(extensions: LoadedExtensions, diagnostics: DiagnosticsList) -> list[Any]:
    return compose_middleware_stack(host_stack(), extensions=extensions, ctx=LEAD, diagnostics=diagnostics)


async def test_a_cancellation_of_the_host_task_propagates() -> None:
    later = Contributor(MiddlewarePlacement(Plain("later"), Placement.STANDARD))
    reached: list[str] = []

    class CancelledWhileComposing:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # the host (stop button, shutdown) cancels the building task...
            reached.append("cancelled")
            raise asyncio.CancelledError()  # ...and the CancelledError surfaces in the contributor

    diagnostics = DiagnosticsList()
    task = asyncio.create_task(_compose_async(loaded(CancelledWhileComposing(), later), diagnostics))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reached == ["cancelled"] and len(diagnostics) == 0


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)])
def test_keyboard_interrupt_and_system_exit_are_the_contributors_failure(exc: BaseException) -> None:
    # An extension cannot stop the Gateway (extensions/boundary/exits.py): it contributes nothing here.
    diagnostics = DiagnosticsList()
    result = compose_middleware_stack(
        host_stack(), extensions=loaded(RaisesBase(exc)), ctx=LEAD, diagnostics=diagnostics
    )
    assert not any(isinstance(mw, IsolatedMiddleware) for mw in result)
    assert [(d.extension, d.error_type) for d in diagnostics] == [("ext0:install", type(exc).__name__)]


def test_none_or_empty_contributes_nothing() -> None:
    diagnostics = DiagnosticsList()
    host = host_stack()
    result = compose_middleware_stack(
        host, extensions=loaded(Returns(None), Returns(())), ctx=LEAD, diagnostics=diagnostics
    )
    assert result == host and len(diagnostics) == 0


def test_an_unkeepable_promise_drops_that_extension_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # A host whose sandbox layer wraps tools makes TOOL_VISIBLE's promise impossible to keep.
    class ToolWrappingSandbox(SandboxLeaseMiddleware):
        def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
            return handler(request)

    class ToolWrap(AgentMiddleware):
        def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
            return handler(request)

    host = [ToolWrappingSandbox() if isinstance(mw, SandboxLeaseMiddleware) else mw for mw in host_stack()]
    diagnostics = DiagnosticsList()
    result = compose_middleware_stack(
        host,
        extensions=loaded(
            Contributor(MiddlewarePlacement(ToolWrap(), Placement.TOOL_VISIBLE)),
            Contributor(MiddlewarePlacement(Plain("kept"), Placement.STANDARD)),
        ),
        ctx=LEAD,
        diagnostics=diagnostics,
    )
    assert [mw.inner.label for mw in result if isinstance(mw, IsolatedMiddleware)] == ["kept"]
    (diag,) = diagnostics
    assert diag.extension == "ext0:install" and "outermost on the tool axis" in diag.message


# -- the guarantees, observed in a running agent ------------------------------------------
class FlakyModel(BaseChatModel):
    """Fails with a transient error ``failures`` times, then replies from ``script``."""

    failures: int = 0
    script: list[AIMessage] = []
    attempts: list[int] = []

    @property
    def _llm_type(self) -> str:
        return "flaky"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FlakyModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.attempts.append(1)
        if len(self.attempts) <= self.failures:
            raise TransientModelError("try again")
        reply = self.script.pop(0) if self.script else AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy(update={"id": f"r{next(_ids)}"}))])


@tool
def fragile(x: int) -> str:
    """Fails on purpose."""
    raise ValueError("tool broke")


def agent_for(stack: list[AgentMiddleware], model: BaseChatModel, tools: list[Any]) -> Any:
    return create_agent(model, tools=tools, middleware=stack)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_model_logical_sees_one_call_and_model_physical_sees_each_attempt(mode: str) -> None:
    logical, physical = Counter("logical"), Counter("physical")
    ext = loaded(
        Contributor(
            MiddlewarePlacement(logical, Placement.MODEL_LOGICAL),
            MiddlewarePlacement(physical, Placement.MODEL_PHYSICAL),
        )
    )
    stack = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD, diagnostics=DiagnosticsList())
    model = FlakyModel(failures=2, script=[AIMessage("answer")], attempts=[])
    agent = agent_for(stack, model, [])
    payload = {"messages": [{"role": "user", "content": "hi"}]}

    result = agent.invoke(payload) if mode == "sync" else await agent.ainvoke(payload)

    assert result["messages"][-1].content == "answer"
    assert len(model.attempts) == 3
    assert (logical.model_calls, physical.model_calls) == (1, 3)


def test_tool_visible_sees_what_the_model_sees_and_tool_raw_sees_the_raw_failure() -> None:
    visible, raw = Counter("visible"), Counter("raw")
    ext = loaded(
        Contributor(MiddlewarePlacement(raw, Placement.TOOL_RAW), MiddlewarePlacement(visible, Placement.TOOL_VISIBLE))
    )
    stack = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD, diagnostics=DiagnosticsList())
    call = AIMessage("", tool_calls=[{"name": "fragile", "args": {"x": 1}, "id": "c1"}])
    model = FlakyModel(script=[call, AIMessage("recovered")], attempts=[])

    result = agent_for(stack, model, [fragile]).invoke({"messages": [{"role": "user", "content": "go"}]})

    (message,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error"  # the tool error handler turned the exception into a message
    assert visible.tool_results == ["error"]
    assert raw.tool_results == ["raised ValueError"]
    assert result["messages"][-1].content == "recovered"
    # Outermost on the tool axis: no tool wrapper precedes it.
    first_tool_wrapper = next(mw for mw in stack if type(mw).wrap_tool_call is not AgentMiddleware.wrap_tool_call)
    assert first_tool_wrapper.inner is visible  # type: ignore[attr-defined]


# -- property: any contributions compose into a valid stack --------------------------------
class ModelHook(AgentMiddleware):
    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return handler(request)


class ToolHook(AgentMiddleware):
    async def awrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        return await handler(request)


class BothHooks(ModelHook):
    def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        return handler(request)


class NodeHook(AgentMiddleware):
    def after_model(self, state, runtime):  # type: ignore[no-untyped-def]
        return None


WRAP_HOOKS = frozenset(hook for pair in WRAP_HOOK_PAIRS for hook in pair)


def _is_or_carries(mw: Any, original: Any) -> bool:
    if mw is original:
        return True
    added = set(vars(mw)) - set(vars(original))
    same = all(vars(mw)[key] is value for key, value in vars(original).items())
    return type(mw) is type(original) and bool(added) and added <= WRAP_HOOKS and same


placement_st = st.builds(
    lambda cls, placement, scope, order: MiddlewarePlacement(cls(), placement, scope, order),
    st.sampled_from([ModelHook, ToolHook, BothHooks, NodeHook]),
    st.sampled_from(list(Placement)),
    st.sampled_from([AgentScope.LEAD, AgentScope.SUBAGENT, AgentScope.BOTH]),
    st.integers(-3, 3),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    contributions=st.lists(st.lists(placement_st, max_size=4), min_size=1, max_size=4),
    omit=st.sets(st.sampled_from(HOST_STACK_ORDER), max_size=4),
    scope=st.sampled_from([AgentScope.LEAD, AgentScope.SUBAGENT]),
)
def test_any_contributions_compose_into_a_stack_that_satisfies_ordering(
    contributions: list[list[MiddlewarePlacement]], omit: set[type], scope: AgentScope
) -> None:
    host = host_stack(omit=tuple(omit))
    ext = loaded(*(Contributor(*items) for items in contributions))
    diagnostics = DiagnosticsList()

    result = compose_middleware_stack(host, extensions=ext, ctx=AgentBuildContext(scope=scope), diagnostics=diagnostics)

    assert_ordering(result)
    assert len(diagnostics) == 0
    # The host stack is intact, in its own order: the caller's objects, untouched, or copies
    # of them that carry a fused group (carry.py) and differ only by those hooks.
    hosts = [mw for mw in result if not isinstance(mw, IsolatedMiddleware)]
    assert len(hosts) == len(host) and all(map(_is_or_carries, hosts, host))
    assert not any(set(vars(mw)) & WRAP_HOOKS for mw in host)
    # Every in-scope contribution is there exactly once; nothing else is.
    expected = [p.middleware for items in contributions for p in items if scope in p.scope]
    got = [mw.inner for mw in result if isinstance(mw, IsolatedMiddleware)]
    assert sorted(map(id, got)) == sorted(map(id, expected))
    # Inside one placement: by order, then registration.
    registration = {id(p.middleware): n for n, p in enumerate(p for items in contributions for p in items)}
    orders = {id(p.middleware): p.order for items in contributions for p in items}
    for placement in Placement:
        group = [mw.inner for mw in result if isinstance(mw, IsolatedMiddleware) and mw.placement is placement]
        keys = [(orders[id(m)], registration[id(m)]) for m in group]
        assert keys == sorted(keys)
    names = [mw.name for mw in result]
    assert len(set(names)) == len(names)


# -- fused runs of wrap-only contributions ---------------------------------------------------
class NoteState(AgentState):  # type: ignore[type-arg]
    notes: Annotated[list[str], operator.add]


class Tracer(AgentMiddleware):
    """Records entry/exit and what its handler returned, on both axes and both paths."""

    def __init__(self, label: str, trace: list[str]) -> None:
        self.label, self.trace = label, trace

    def _after(self, result: Any) -> Any:
        self.trace.append(f"{self.label}< {type(result).__name__}")
        return result

    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.trace.append(f"{self.label}>")
        return self._after(handler(request))

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.trace.append(f"{self.label}>")
        return self._after(await handler(request))

    def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.trace.append(f"{self.label} tool>")
        return self._after(handler(request))

    async def awrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.trace.append(f"{self.label} tool>")
        return self._after(await handler(request))


class Unwraps(AgentMiddleware):
    """Returns a bare AIMessage: LangChain normalises it before the next layer out sees it."""

    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return handler(request).result[0]

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return (await handler(request)).result[0]


class Commands(AgentMiddleware):
    """Returns a command with the response; commands of every layer must reach the state."""

    def __init__(self, note: str) -> None:
        self.note = note

    def _extend(self, response: Any) -> Any:
        return ExtendedModelResponse(model_response=response, command=Command(update={"notes": [self.note]}))

    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return self._extend(handler(request))

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        return self._extend(await handler(request))


class Breaks(AgentMiddleware):
    """Raises before calling the handler; isolation must call the downstream exactly once."""

    def wrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise RuntimeError("broken extension")

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        raise RuntimeError("broken extension")


class AsyncToolOnly(AgentMiddleware):
    def __init__(self, trace: list[str]) -> None:
        self.trace = trace

    async def awrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        self.trace.append("tool-only>")
        return await handler(request)


@tool
def echo(x: int) -> str:
    """Echoes."""
    return f"echo {x}"


def _fusion_scenario(trace: list[str]) -> LoadedExtensions:
    """Six extensions, each with one wrap-only STANDARD contribution: one fused run. The two
    that return commands and the one that unwraps the response decide (``intercept: true``);
    the others observe."""
    return loaded(
        Contributor(MiddlewarePlacement(Tracer("a", trace), Placement.STANDARD)),
        Contributor(MiddlewarePlacement(Commands("outer"), Placement.STANDARD)),
        Contributor(MiddlewarePlacement(Breaks(), Placement.STANDARD)),
        Contributor(MiddlewarePlacement(Unwraps(), Placement.STANDARD)),
        Contributor(MiddlewarePlacement(AsyncToolOnly(trace), Placement.STANDARD)),
        Contributor(MiddlewarePlacement(Commands("inner"), Placement.STANDARD)),
        intercepting=(1, 3, 5),
    )


def _arrange(monkeypatch: pytest.MonkeyPatch, arrangement: str) -> None:
    """Compose groups ``carried`` (the default), ``fused`` into a layer of their own but not
    carried, or ``separate``: one layer per contribution."""
    monkeypatch.setattr(stack_module, "_plans", Memo(limit=256))  # decided anew, under the patches below
    if arrangement in ("fused", "separate"):
        monkeypatch.setattr(layers_module, "carry_plan", lambda stack: ())
    if arrangement == "separate":
        monkeypatch.setattr(layers_module, "fusible_runs", lambda stack: ())


def _hooked(stack: Sequence[Any]) -> list[Any]:
    """The contributed entries LangChain builds a layer for."""
    return [mw for mw in stack if isinstance(mw, IsolatedMiddleware) and implemented_hooks(type(mw))]


async def _outcome(
    stack: list[Any], model: FlakyModel, mode: str, trace: list[str], diagnostics: DiagnosticsList, tools: Any = ()
) -> tuple[Any, ...]:
    """Run ``stack`` once under create_agent: what was traced, the messages, the notes, the
    model's attempts and the diagnostics."""
    agent = create_agent(model, tools=list(tools), middleware=stack, state_schema=NoteState)
    payload = {"messages": [{"role": "user", "content": "go"}]}
    result = agent.invoke(payload) if mode == "sync" else await agent.ainvoke(payload)
    return (
        trace,
        [(type(m).__name__, m.content) for m in result["messages"]],
        result["notes"],
        len(model.attempts),
        [(d.extension, d.message) for d in diagnostics],
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_fused_run_behaves_exactly_as_separate_layers(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nesting, normalisation, commands, per-member isolation: fused == one layer each."""
    outcomes = []
    # Carried into the host layers before it (the default), fused into one layer of its own,
    # and one layer per contribution: LangChain builds 0, 1 and 6 contributed layers.
    for arrangement, layers in (("carried", 0), ("fused", 1), ("separate", 6)):
        _arrange(monkeypatch, arrangement)
        trace: list[str] = []
        diagnostics = DiagnosticsList()
        stack = compose_middleware_stack(
            host_stack(), extensions=_fusion_scenario(trace), ctx=LEAD, diagnostics=diagnostics
        )
        assert len(_hooked(stack)) == layers
        call = AIMessage("", tool_calls=[{"name": "echo", "args": {"x": 1}, "id": "c1"}])
        model = FlakyModel(script=[call, AIMessage("answer")], attempts=[])
        outcomes.append(await _outcome(stack, model, mode, trace, diagnostics, tools=[echo]))
    carried, fused, separate = outcomes
    assert carried == fused == separate
    trace, _, notes, attempts, diags = carried
    # Sanity: the scenario exercised what it claims to.
    assert trace[:2] == ["a>", "a< ModelResponse"] and ("tool-only>" in trace) == (mode == "async")
    assert notes == ["inner", "outer", "inner", "outer"]  # inner-first, per model call
    assert attempts == 2  # the broken member did not repeat the model call
    hook = "wrap_model_call" if mode == "sync" else "awrap_model_call"
    assert diags == [("ext2:install", f"Breaks.{hook} raised RuntimeError: broken extension")] * 2


class Fresh:
    """A contributor that makes new middleware for every construction, as most do."""

    def __init__(self, make: Any, placement: Placement = Placement.STANDARD) -> None:
        self.make, self.placement = make, placement

    def contribute_middlewares(self, app_store: Any, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return [MiddlewarePlacement(self.make(), self.placement)]


def _observing_scenario(trace: list[str]) -> LoadedExtensions:
    """Seven observing wrap-only STANDARD contributions, two of them misbehaving (one
    fused run), inside them an intercepting MODEL_PHYSICAL one that adds a command."""
    return loaded(
        Fresh(lambda: Tracer("a", trace)),
        Fresh(lambda: Tracer("b", trace)),
        Fresh(lambda: SyncModelTracer("s", trace)),  # on the async path: a pass-through
        Fresh(Breaks),
        Fresh(lambda: Tracer("c", trace)),
        Fresh(Unwraps),
        Fresh(lambda: Tracer("d", trace)),
        Fresh(lambda: Commands("physical"), Placement.MODEL_PHYSICAL),
        intercepting=(7,),
    )


class SyncModelTracer(Tracer):
    """Traces sync model calls only; the async side is the wrapper's pass-through."""

    awrap_model_call = AgentMiddleware.awrap_model_call  # type: ignore[assignment]
    wrap_tool_call = AgentMiddleware.wrap_tool_call  # type: ignore[assignment]
    awrap_tool_call = AgentMiddleware.awrap_tool_call  # type: ignore[assignment]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_group_of_observers_behaves_exactly_as_separate_layers(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Observers are chained without LangChain's model-call glue between them (wrap_fusion.py):
    what each sees, the commands, the diagnostics and the answer are those of separate layers."""
    outcomes = []
    for arrangement in ("carried", "fused", "separate"):
        _arrange(monkeypatch, arrangement)
        trace: list[str] = []
        diagnostics = DiagnosticsList()
        ext = _observing_scenario(trace)
        stack = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD, diagnostics=diagnostics)
        heads = [mw for mw in stack if isinstance(mw, IsolatedMiddleware) and mw.fused_group]
        assert len(heads) == (0 if arrangement == "separate" else 1)
        model = FlakyModel(script=[AIMessage("answer")], attempts=[])
        outcomes.append(await _outcome(stack, model, mode, trace, diagnostics))
    carried, fused, separate = outcomes
    assert carried == fused == separate
    trace, messages, notes, _, diags = carried
    labels = "abscd" if mode == "sync" else "abcd"
    assert trace == [*(f"{label}>" for label in labels), *(f"{label}< ModelResponse" for label in labels[::-1])]
    assert messages[-1] == ("AIMessage", "answer") and notes == ["physical"]
    hook = "wrap_model_call" if mode == "sync" else "awrap_model_call"
    assert [extension for extension, _ in diags] == ["ext3:install", "ext5:install"]
    assert diags[0][1] == f"Breaks.{hook} raised RuntimeError: broken extension"


def _shape_of(stack: Sequence[Any]) -> list[Any]:
    """A composed stack as LangChain and the checks see it, without object identities: each
    entry's class (its inner class and name, for a contribution), the positions of a fused
    group, and the hooks a carrier has of its own."""
    entries: list[Any] = []
    for mw in stack:
        group = tuple(stack.index(member) for member in getattr(mw, "fused_group", ()))
        own = sorted(set(vars(mw)) & WRAP_HOOKS)
        inner = (type(mw.inner), mw.name, mw.extension) if isinstance(mw, IsolatedMiddleware) else None
        entries.append((type(mw), inner, group, own))
    return entries


def test_a_repeated_shape_is_built_from_its_plan_without_deciding_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second construction of a shape makes its own objects the way the first decided."""
    monkeypatch.setattr(stack_module, "_plans", Memo(limit=256))
    trace: list[str] = []
    ext = loaded(
        Fresh(lambda: Tracer("a", trace)),
        Fresh(lambda: Tracer("b", trace)),
        Fresh(lambda: Plain("node hook")),
        Fresh(lambda: Tracer("physical 1", trace), Placement.MODEL_PHYSICAL),
        Fresh(lambda: Tracer("physical 2", trace), Placement.MODEL_PHYSICAL),
        Fresh(lambda: Tracer("raw", trace), Placement.TOOL_RAW),
    )
    first = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD)

    def forbidden(*args: Any) -> Any:
        raise AssertionError("decided again")

    for name in ("_layout", "assert_ordering", "plan_layers"):
        monkeypatch.setattr(stack_module, name, forbidden)
    for name in ("fusible_runs", "carry_plan"):
        monkeypatch.setattr(layers_module, name, forbidden)
    host = host_stack()
    second = compose_middleware_stack(host, extensions=ext, ctx=LEAD)

    assert _shape_of(second) == _shape_of(first)
    assert any(set(vars(mw)) & WRAP_HOOKS for mw in second)  # the scenario carries a group
    # Made of this construction's objects: its contributions, its host (or copies carrying a group).
    firsts = {id(mw.inner) for mw in first if isinstance(mw, IsolatedMiddleware)}
    assert not any(id(mw.inner) in firsts for mw in second if isinstance(mw, IsolatedMiddleware))
    assert all(map(_is_or_carries, host_layers(second), host))
    for mw in second:
        assert all(member in second for member in getattr(mw, "fused_group", ()))
    assert not any(set(vars(mw)) & WRAP_HOOKS for mw in host)  # the caller's host is untouched
    assert_ordering(second)  # the module's own check, not the patched name


def test_a_shape_that_differs_by_what_fusing_reads_is_planned_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack_module, "_plans", Memo(limit=256))
    trace: list[str] = []
    with_tool = {"now": False}

    def maybe_with_tool() -> Tracer:
        made = Tracer("b", trace)
        if with_tool["now"]:
            made.tools = [echo]
        return made

    ext = loaded(Fresh(lambda: Tracer("a", trace)), Fresh(maybe_with_tool))
    grouped = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD)
    with_tool["now"] = True
    apart = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD)

    assert any(getattr(mw, "fused_group", ()) for mw in grouped)
    assert not any(getattr(mw, "fused_group", ()) for mw in apart)  # a wrapper with tools is not fused
    assert len(stack_module._plans) == 2


def test_a_dropped_contribution_is_reported_by_every_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack_module, "_plans", Memo(limit=256))
    ext = loaded(Fresh(Plain), Fresh(lambda: Counter("late"), Placement.MODEL_PHYSICAL))
    real_check = stack_module.assert_ordering

    def refuse_physical(stack: Sequence[Any]) -> None:
        for mw in stack:
            if isinstance(mw, IsolatedMiddleware) and mw.placement is Placement.MODEL_PHYSICAL:
                raise OrderingError("cannot be placed here", extension=mw.extension)
        real_check(stack)

    monkeypatch.setattr(stack_module, "assert_ordering", refuse_physical)
    for _ in range(2):
        diagnostics = DiagnosticsList()
        stack = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD, diagnostics=diagnostics)
        assert [type(mw.inner).__name__ for mw in stack if isinstance(mw, IsolatedMiddleware)] == ["Plain"]
        assert [(d.extension, "dropped" in d.message) for d in diagnostics] == [("ext1:install", True)]
    assert len(stack_module._plans) == 0


def test_a_fused_run_keeps_every_entry_in_place_for_descriptor_and_ordering() -> None:
    trace: list[str] = []
    stack = compose_middleware_stack(host_stack(), extensions=_fusion_scenario(trace), ctx=LEAD)
    contributed = [mw for mw in stack if isinstance(mw, IsolatedMiddleware)]
    (head,) = [mw for mw in contributed if mw.fused_group]
    assert head is contributed[0] and head.fused_group == tuple(contributed)
    # The descriptor still lists each contribution by its own class and extension, in order.
    described = [(d.name, d.extension) for d in map(describe_middleware, stack) if d.extension]
    assert described == [
        ("Tracer", "ext0:install"),
        ("Commands", "ext1:install"),
        ("Breaks", "ext2:install"),
        ("Unwraps", "ext3:install"),
        ("AsyncToolOnly", "ext4:install"),
        ("Commands", "ext5:install"),
    ]
    # Each entry still reports its own hooks to the ordering checks.
    assert [mw.wrapped_hooks for mw in contributed] == [implemented_hooks(type(mw.inner)) for mw in contributed]
    assert_ordering(stack)
    # A group whose members are moved away from their head is an ordering error.
    index = stack.index(contributed[2])
    broken = [*stack[:index], *stack[index + 1 : -1], stack[index], stack[-1]]
    with pytest.raises(OrderingError, match="fused group"):
        check_fused_groups(broken)


def test_only_consecutive_wrap_only_contributions_in_one_placement_are_fused() -> None:
    trace: list[str] = []

    class WithTool(Tracer):
        tools = [echo]

    ext = loaded(
        Contributor(
            MiddlewarePlacement(Tracer("a", trace), Placement.STANDARD),
            MiddlewarePlacement(Tracer("b", trace), Placement.STANDARD),
            MiddlewarePlacement(Plain("node hook"), Placement.STANDARD),  # breaks the run
            MiddlewarePlacement(Tracer("c", trace), Placement.STANDARD),
            MiddlewarePlacement(WithTool("tools", trace), Placement.STANDARD),  # not fusible
            MiddlewarePlacement(Tracer("d", trace), Placement.STANDARD),
            MiddlewarePlacement(Tracer("physical 1", trace), Placement.MODEL_PHYSICAL),  # next placement
            MiddlewarePlacement(Tracer("physical 2", trace), Placement.MODEL_PHYSICAL),
        )
    )
    stack = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD)
    groups = [[m.inner.label for m in mw.fused_group] for mw in stack if isinstance(mw, IsolatedMiddleware)]
    assert [g for g in groups if g] == [["a", "b"], ["physical 1", "physical 2"]]
    # The [a, b] group runs inside the host layers before the slot (carry.py); the MODEL_PHYSICAL
    # group's nearest model layer is a contribution ("d"), so it keeps a layer of its own.
    assert [mw.inner.label for mw in _hooked(stack)] == ["node hook", "c", "tools", "d", "physical 1"]
    assert_ordering(stack)


class SpanName(AgentMiddleware):
    """Records the name of the LangSmith run it executes in."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
        from langsmith.run_helpers import get_current_run_tree

        run = get_current_run_tree()
        self.seen.append(run.name if run is not None else "untraced")
        return await handler(request)


async def test_a_carried_group_still_records_its_own_langsmith_span(monkeypatch: pytest.MonkeyPatch) -> None:
    """Carried or a layer of its own, the group's span has the name create_agent gives it."""
    from unittest.mock import MagicMock

    import langsmith

    names = []
    for carry in (True, False):
        _arrange(monkeypatch, "carried" if carry else "fused")
        seen: list[str] = []
        ext = loaded(
            Contributor(MiddlewarePlacement(SpanName(seen), Placement.STANDARD)),
            Contributor(MiddlewarePlacement(SpanName(seen), Placement.STANDARD)),
        )
        stack = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD)
        (head,) = [mw for mw in stack if isinstance(mw, IsolatedMiddleware) and mw.fused_group]
        assert len(_hooked(stack)) == (0 if carry else 1)
        agent = create_agent(FlakyModel(script=[AIMessage("ok")], attempts=[]), middleware=stack)
        with langsmith.tracing_context(enabled=True, client=MagicMock(spec=langsmith.Client)):
            await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
        assert seen == [f"{head.name}.awrap_model_call"] * 2
        names.append(seen[0])
    assert names[0] == names[1]


@pytest.mark.parametrize("tracing", [False, True])
async def test_an_untraced_carried_call_skips_langsmiths_wrapper(
    monkeypatch: pytest.MonkeyPatch, tracing: bool
) -> None:
    """With nothing to record the group's chain runs directly; traced, through ``traceable``."""
    from unittest.mock import MagicMock

    import langsmith

    from deerflow_ext.extensions.composition import carry

    wrapped: list[str] = []
    table = carry._traced_group_hooks()
    assert table is not None

    def counting(hook: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            wrapped.append(hook)
            return await table[hook](*args, **kwargs)

        return call

    counted = {**table, "awrap_model_call": counting("awrap_model_call")}
    monkeypatch.setattr(carry, "_traced_group_hooks", lambda: counted)
    seen: list[str] = []
    ext = loaded(
        Contributor(MiddlewarePlacement(SpanName(seen), Placement.STANDARD)),
        Contributor(MiddlewarePlacement(SpanName(seen), Placement.STANDARD)),
    )
    stack = compose_middleware_stack(host_stack(), extensions=ext, ctx=LEAD)
    agent = create_agent(FlakyModel(script=[AIMessage("ok")], attempts=[]), middleware=stack)
    client = MagicMock(spec=langsmith.Client)
    with langsmith.tracing_context(enabled=tracing, client=client if tracing else None):
        result = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
    assert result["messages"][-1].content == "ok"
    assert len(seen) == 2  # both members ran either way
    assert wrapped == (["awrap_model_call"] if tracing else [])
    assert (seen[0] != "untraced") is tracing


class _Slotted(AgentMiddleware):
    __slots__ = ("limit",)


class _OwnCopy(AgentMiddleware):
    def __copy__(self) -> _OwnCopy:
        return self


class _OwnState(AgentMiddleware):
    def __getstate__(self) -> dict[str, Any]:
        return {}


def test_a_carrier_is_copied_as_copy_copy_would_copy_it() -> None:
    """A host layer that carries a group is a shallow copy: made without ``copy.copy``'s
    protocol when the class uses none of it, by ``copy.copy`` itself when it does."""
    import copy

    from deerflow_ext.extensions.composition import carry

    for layer in host_stack():
        copier = carry._copier(type(layer))
        assert copier is carry._plain_copy, type(layer).__name__  # every host class is plain
        clone = copier(layer)
        assert type(clone) is type(layer) and clone is not layer
        assert vars(clone) == vars(copy.copy(layer)) and vars(clone) is not vars(layer)
        assert all(vars(clone)[name] is value for name, value in vars(layer).items())  # shallow
    for cls in (_Slotted, _OwnCopy, _OwnState):
        assert carry._copier(cls) is copy.copy, cls.__name__
