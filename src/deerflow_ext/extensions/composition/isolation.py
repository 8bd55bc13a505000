"""``IsolatedMiddleware``: a contributed middleware that cannot take a run down with it.

Every middleware an extension contributes is wrapped before it reaches ``create_agent``.
The wrapper's rules (docs/SPEC.md, "Runtime slice": isolation of contributed middleware):

* **Look exactly like the inner middleware to LangChain**, hook for hook: the wrapper's
  class is generated per inner class (``mirror.py``), which also completes a one-sided
  sync/async wrap pair with a pass-through (a sync-only extension does not break
  ``ainvoke``; it simply does not observe it). ``tools``, ``state_schema``,
  ``transformers`` and ``trace_policy`` are mirrored from the instance, here.
* **Observe, never decide** (DeerFlow's ``IsolatedMiddleware`` guarantee). A contributed
  wrap hook sees the call; it does not get to change it. The handler it is given always runs
  the host's *original* request, whatever the extension passes it; the wrap hook's own
  return value is discarded in favour of the handler's result; the handler runs exactly once
  (a second call raises into the extension and does not reach downstream; a hook that never
  calls it has the host call it); and a handler failure stays the graph's — it propagates
  even when the extension swallowed it or raised something else over it, because the retry
  and error layers outside must see it as it is. Each such violation is one attributed
  diagnostic line (rewrite, skip, replace, call twice, swallow), and the call goes on as if
  the extension were absent. An exception of the extension's own fails open the same way.
  Node hooks (``before_*``/``after_*``) return state updates, which LangGraph applies; a
  failing one applies nothing.
* **Intercept only when the operator says so.** A ``plugins:`` record with ``intercept:
  true`` opts its middlewares out of observe-only: they may rewrite the request, short-circuit
  or replace the result, call the handler again. A decision-making middleware that silently
  stopped deciding would be a security hole, so these fail **closed**: an exception of the
  extension's own (or a result LangChain cannot take) is one attributed diagnostic line and
  then fails the run.
* **Judge a CancelledError by its origin** (docs/SPEC.md, "Notifications and fail-open":
  cancellation by origin; ``origin.py``). One the
  extension raised itself — an internal timeout built on cancellation — is contained like
  any other failure: otherwise it would end an otherwise healthy run as an error. A genuine
  cancellation of the run's task propagates.
* **Contain ``KeyboardInterrupt``/``SystemExit``** the extension's code raises, like any
  other failure (``exits.py``): LangGraph may run a node in a task of its own, and from
  there either would leave the event loop and end the Gateway. The downstream call's own
  (a tool the host does not wrap) still propagates unchanged, to the run's boundary.

A wrapper made here is its own LangChain layer; making a run of them cheaper to run (one
layer for a run of wrap-only wrappers) is ``wrap_fusion.py``'s and ``carry.py``'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from ..boundary.diagnostics import DiagnosticsList
from ..boundary.exits import EXTENSION_FAILURES
from ..boundary.loopwatch import RunningHook, register_site
from ..boundary.origin import is_host_cancellation
from ..operator_view.hook_metrics import HookStats, stats_table
from .handler_watch import NOT_RUN, HandlerWatch
from .hooks import node_name
from .mirror import isolated_class

if TYPE_CHECKING:
    from deerflow_extension_api import Placement

__all__ = ["IsolatedMiddleware", "isolate"]

_PHASE = "middleware"
_MISSING: Any = NOT_RUN  # the handler has not run (handler_watch.py)
#: What LangChain takes from each wrap hook: an intercepting hook's result is checked.
_VALID_RESULTS: dict[str, tuple[type, ...]] = dict.fromkeys(
    ("wrap_model_call", "awrap_model_call"), (ModelResponse, AIMessage, ExtendedModelResponse)
) | dict.fromkeys(("wrap_tool_call", "awrap_tool_call"), (ToolMessage, Command))
# What the wrapper contains: any Exception, a CancelledError the extension raised itself
# (``is_host_cancellation`` sends a real cancellation of the run on), and the process exits
# (exits.py: an extension cannot stop the Gateway).
_CONTAINED = EXTENSION_FAILURES


_perf_counter = time.perf_counter
_DEFAULT_SCHEMA: Any = AgentMiddleware.state_schema  # type: ignore[misc]
#: A wrapper's tools when its middleware has none (``Sequence``, as LangChain types it):
#: shared and immutable, one list fewer for the collector per contribution and construction.
_NO_TOOLS: tuple[Any, ...] = ()


class IsolatedMiddleware(AgentMiddleware):
    """Observe-only, fail-open wrapper around one contributed middleware, attributed to
    ``extension`` (intercepting and fail-closed with ``intercept=True``).

    ``IsolatedMiddleware(inner, extension=...)`` returns an instance of a subclass generated
    for ``type(inner)`` (cached), which defines only the hooks ``inner`` implements. This base
    class defines no hook at all, on purpose. ``index`` disambiguates node names when one
    stack holds the same class from the same extension more than once; the composition point
    assigns it deterministically so node names (which end up in checkpoints) are stable.
    """

    _hooks: ClassVar[frozenset[str]] = frozenset()

    def __new__(cls, inner: AgentMiddleware, **options: Any) -> IsolatedMiddleware:
        # Only picks the generated subclass; __init__ declares (and checks) the options.
        if not isinstance(inner, AgentMiddleware):
            raise TypeError(f"expected an AgentMiddleware, got {type(inner).__name__}")
        if isinstance(inner, IsolatedMiddleware):
            raise TypeError("middleware is already isolated")
        if cls is IsolatedMiddleware:
            cls = isolated_class(IsolatedMiddleware, type(inner))
        return object.__new__(cls)

    def __init__(
        self,
        inner: AgentMiddleware,
        *,
        extension: str,
        index: int = 1,
        diagnostics: DiagnosticsList,
        placement: Placement | None = None,
        intercept: bool = False,
    ) -> None:
        self._setup(inner, extension, index, diagnostics, placement, intercept)

    def _setup(
        self,
        inner: AgentMiddleware,
        extension: str,
        index: int,
        diagnostics: DiagnosticsList,
        placement: Placement | None,
        intercept: bool,
    ) -> None:
        """What ``__init__`` does, with positional arguments (:func:`isolate` calls it too)."""
        self._inner = inner
        self._extension = extension
        self._diagnostics = diagnostics
        self._placement = placement
        self._intercept = intercept
        self._name = node_name(extension, type(inner).__name__, index)
        # Per-hook counters (metrics.py), resolved once here rather than on every call.
        self._stats: Mapping[str, HookStats] = stats_table(extension, self._hooks)
        # Mirrored once, here: create_agent reads these during construction, and a raising
        # property in extension code must become a diagnostic, not a failed build.
        try:
            tools = getattr(inner, "tools", None)
            state_schema = getattr(inner, "state_schema", None)
            transformers = getattr(inner, "transformers", None)
            trace_policy = getattr(inner, "trace_policy", None)
        except _CONTAINED:
            # One of them raised: each on its own, so only that one is reported.
            tools = self._mirror("tools")
            state_schema = self._mirror("state_schema")
            transformers = self._mirror("transformers")
            trace_policy = self._mirror("trace_policy")
        self.tools = _NO_TOOLS if tools is None else (list(tools) or _NO_TOOLS)
        self.state_schema = _DEFAULT_SCHEMA if state_schema is None else state_schema
        self.transformers = () if transformers is None else tuple(transformers)
        self.trace_policy = trace_policy

    # -- attribution -----------------------------------------------------------------------
    @property
    def inner(self) -> AgentMiddleware:
        """The extension's own middleware."""
        return self._inner

    @property
    def extension(self) -> str:
        """Attribution: the contributing entry's resolved ``module:attr``."""
        return self._extension

    @property
    def placement(self) -> Placement | None:
        """Where the composition point put it; ``assert_ordering`` checks the promise."""
        return self._placement

    @property
    def intercepts(self) -> bool:
        """Whether the operator let this middleware decide (``intercept: true``): it may then
        rewrite, short-circuit or replace, and it fails closed."""
        return self._intercept

    @property
    def name(self) -> str:
        """A unique, LangGraph-valid node-name prefix: ``ext_<slug>_<ClassName>_<n>``."""
        return self._name

    @property
    def wrapped_hooks(self) -> frozenset[str]:
        """The hooks the inner middleware implements, as ``create_agent`` would detect them.

        Whatever hooks the wrapper's class exposes to LangChain (``wrap_fusion.py`` may give it a
        class that exposes more or none); ordering checks read this, not the class.
        """
        return type(self)._hooks

    @property
    def fused_group(self) -> tuple[IsolatedMiddleware, ...]:
        """The wrappers this one runs as one LangChain layer, itself first: none, for a
        wrapper that is its own layer (a fused group's head says otherwise, ``wrap_fusion.py``)."""
        return ()

    def __repr__(self) -> str:
        mode = ", intercept=True" if self._intercept else ""
        return f"IsolatedMiddleware({self._inner!r}, extension={self._extension!r}{mode})"

    # -- failure handling ------------------------------------------------------------------
    def _mirror(self, attr: str) -> Any:
        """The inner middleware's ``attr``, or None when it has none or it raises (reported)."""
        try:
            return getattr(self._inner, attr, None)
        except _CONTAINED as exc:  # a property in extension code
            if is_host_cancellation(exc):
                raise
            self._fail(attr, exc)
            return None

    def _report(self, hook: str, problem: str, exc: BaseException | None = None) -> None:
        """One attributed diagnostic line: ``Extension <use>: <Class>.<hook> <problem>``."""
        self._diagnostics.record(self._extension, _PHASE, f"{type(self._inner).__name__}.{hook} {problem}", exc=exc)

    def _fail(self, hook: str, exc: BaseException) -> None:
        stats = self._stats.get(hook)
        if stats is not None:
            stats.failures += 1
            if isinstance(exc, asyncio.CancelledError):
                stats.cancellations += 1
        closed = "; the run fails (intercept: true fails closed)" if self._intercept else ""
        self._report(hook, f"raised {type(exc).__name__}: {exc}{closed}", exc)

    def _invalid(self, hook: str, value: Any) -> TypeError:
        """Attribute a result LangChain cannot take; returned for an intercepting caller to raise."""
        error = TypeError(f"returned {type(value).__name__}, which is not a valid {hook} result")
        self._fail(hook, error)
        return error

    # -- node hooks ------------------------------------------------------------------------
    def _run_state_hook(self, hook: str, state: Any, runtime: Any) -> Any:
        started = _perf_counter()
        try:
            update = getattr(self._inner, hook)(state, runtime)
        except BaseException as exc:
            failure = self._contained(hook, exc, _perf_counter() - started, None)
        else:
            return self._updated(hook, update, started)
        return self._state_failed(hook, failure)

    async def _arun_state_hook(self, hook: str, state: Any, runtime: Any) -> Any:
        started = _perf_counter()
        try:
            update = await getattr(self._inner, hook)(state, runtime)
        except BaseException as exc:
            failure = self._contained(hook, exc, _perf_counter() - started, None)
        else:
            return self._updated(hook, update, started)
        return self._state_failed(hook, failure)

    def _contained(self, hook: str, exc: BaseException, seconds: float, watch: HandlerWatch | None) -> BaseException:
        """Counts a call of ``hook`` that raised ``exc`` (``seconds`` its own time), and
        returns ``exc`` when the wrapper contains it (the caller settles it) or raises it again.

        ``GraphBubbleUp`` (LangGraph's interrupts) and a cancellation of the run itself (stop,
        shutdown) propagate, as does anything that is not an extension failure; a downstream
        failure that came back through the hook is the handler's, never the run's
        cancellation.
        """
        self._count(hook, seconds)
        if isinstance(exc, GraphBubbleUp) or not isinstance(exc, _CONTAINED):
            raise exc
        if (watch is None or exc is not watch.error) and is_host_cancellation(exc):
            self._cancelled(hook)
            raise exc
        return exc

    def _count(self, hook: str, seconds: float) -> None:
        """One call of ``hook`` and the time it took (the extension's own, metrics.py)."""
        stats = self._stats.get(hook)
        if stats is not None:
            stats.calls += 1
            stats.seconds += seconds

    def _cancelled(self, hook: str) -> None:
        stats = self._stats.get(hook)
        if stats is not None:
            stats.cancellations += 1

    def _state_failed(self, hook: str, failure: BaseException) -> Any:
        """A node hook's own (contained) failure: no update (fail open), or the run's end
        (intercept)."""
        self._fail(hook, failure)
        if self._intercept:
            raise failure
        return None

    def _updated(self, hook: str, update: Any, started: float) -> Any:
        """A node hook's update, counted (its time since ``started``) and checked: a
        malformed one would fail later inside LangGraph, far from the extension that produced
        it, so it is rejected here, attributed, and nothing is applied (or, intercepting, the
        run fails)."""
        self._count(hook, _perf_counter() - started)
        if update is None or isinstance(update, (Mapping, Command)):
            return update
        error = self._invalid(hook, update)
        if self._intercept:
            raise error
        return None

    # -- wrap hooks ------------------------------------------------------------------------
    # Settled outside the except clause, so a downstream error raised again by _settled does
    # not get the extension's own failure as its context.
    def _run_wrap_hook(self, hook: str, request: Any, handler: Callable[[Any], Any]) -> Any:
        watch = HandlerWatch(request, handler, self._intercept)
        started = _perf_counter()
        failure: BaseException | None = None
        try:
            returned = getattr(self._inner, hook)(request, watch.call)
        except BaseException as exc:
            returned, failure = _MISSING, self._contained(hook, exc, _perf_counter() - started - watch.seconds, watch)
        settled = self._settled(hook, watch, returned, failure, started)
        return handler(request) if settled is _MISSING else settled

    async def _arun_wrap_hook(self, hook: str, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        watch = HandlerWatch(request, handler, self._intercept)
        started = _perf_counter()
        failure: BaseException | None = None
        try:
            returned = await getattr(self._inner, hook)(request, watch.acall)
        except BaseException as exc:
            returned, failure = _MISSING, self._contained(hook, exc, _perf_counter() - started - watch.seconds, watch)
        settled = self._settled(hook, watch, returned, failure, started)
        return await handler(request) if settled is _MISSING else settled

    def _settled(
        self, hook: str, watch: HandlerWatch, returned: Any, failure: BaseException | None, started: float
    ) -> Any:
        """What the wrap hook's call comes to: its own outcome counted (the time since
        ``started`` less the downstream's) when it returned, then :meth:`_settle`'s answer,
        except on every observer's path on every model and tool call, decided here first:
        it called its handler once, with the host's request, and handed back its result."""
        if failure is None:
            stats = self._stats.get(hook)
            if stats is not None:
                stats.calls += 1
                stats.seconds += _perf_counter() - started - watch.seconds
            if returned is watch.result and watch.calls == 1 and not watch.rewritten and not watch.deciding:
                return returned
        return self._settle(hook, watch, returned, failure)

    def _settle(self, hook: str, watch: HandlerWatch, returned: Any, failure: BaseException | None) -> Any:
        """The observed call's outcome once the extension's code has returned or raised.

        The handler's outcome, as if the extension were absent: its result, its exception
        (re-raised), or ``_MISSING`` when it has not run (the caller then runs it, once).
        Each way the extension tried to decide instead of observe is one diagnostic line.
        """
        if watch.deciding:
            return self._decided(hook, watch, returned, failure)
        if watch.rewritten:
            self._report(hook, "passed its handler another request; the handler ran the host's request")
        if watch.calls > 1:
            self._report(hook, f"called its handler {watch.calls} times; the handler ran once")
        own_failure = failure is not None and failure is not watch.error and failure is not watch.repeat
        error = watch.error
        if error is not None:
            if own_failure:
                assert failure is not None
                self._report(
                    hook,
                    f"raised {type(failure).__name__}: {failure} over its handler's "
                    f"{type(error).__name__}, which propagates",
                    failure,
                )
            elif failure is not error:
                self._report(hook, f"swallowed its handler's {type(error).__name__}, which propagates", error)
            raise error
        if own_failure:
            assert failure is not None
            self._fail(hook, failure)
        if watch.calls == 0:
            if not own_failure:
                self._report(hook, "did not call its handler; the host called it and used its result")
            return _MISSING
        if not own_failure and failure is None and returned is not watch.result:
            self._report(hook, f"returned {type(returned).__name__} instead of its handler's result, which is used")
        return watch.result

    def _decided(self, hook: str, watch: HandlerWatch, returned: Any, failure: BaseException | None) -> Any:
        """An intercepting hook's outcome: what it returned, or the run fails (fail closed).

        Its own failure, or a result LangChain cannot take, is attributed first; a downstream
        failure it let through is the downstream's and propagates without a line.
        """
        if failure is not None:
            if failure is not watch.error:
                self._fail(hook, failure)
            raise failure
        if isinstance(returned, _VALID_RESULTS[hook]):
            return returned
        raise self._invalid(hook, returned)


def isolate(
    inner: AgentMiddleware,
    *,
    extension: str,
    index: int,
    diagnostics: DiagnosticsList,
    placement: Placement,
    intercept: bool,
) -> IsolatedMiddleware:
    """``IsolatedMiddleware(inner, ...)`` for a caller that has checked ``inner`` already
    (composition validates every contribution first).

    Speed: constructing through the class runs ``__new__``'s checks again and packs the
    options into a dict for it, ~7K of the ~20K instructions a wrapper costs, for every
    contribution of every construction.
    """
    wrapper: IsolatedMiddleware = object.__new__(isolated_class(IsolatedMiddleware, type(inner)))
    wrapper._setup(inner, extension, index, diagnostics, placement, intercept)
    return wrapper


def _running_hook(frame: Any) -> RunningHook:
    names = frame.f_locals
    return RunningHook(names["self"]._extension, f"{type(names['self']._inner).__name__}.{names['hook']}")


for _runner in (
    IsolatedMiddleware._run_state_hook,
    IsolatedMiddleware._arun_state_hook,
    IsolatedMiddleware._run_wrap_hook,
    IsolatedMiddleware._arun_wrap_hook,
):
    register_site(_runner, _running_hook)
