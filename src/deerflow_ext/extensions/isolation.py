"""``IsolatedMiddleware``: a contributed middleware that cannot take a run down with it.

Every middleware an extension contributes is wrapped before it reaches ``create_agent``.
The wrapper has three jobs:

* **Look exactly like the inner middleware to LangChain.** ``create_agent`` decides which
  graph nodes and wrapper chains to build by comparing *class attributes* against
  ``AgentMiddleware``'s (``m.__class__.before_model is not AgentMiddleware.before_model``).
  A single wrapper class that defined every hook would add a node for every hook of every
  contribution, and a wrapper that defined none would hide them all. So one subclass is
  generated per inner class, defining precisely the hooks the inner class overrides, with
  ``__can_jump_to__`` copied so conditional edges survive. ``tools``, ``state_schema``,
  ``transformers`` and ``trace_policy`` are mirrored from the instance.
* **Complete the sync/async pair.** LangChain treats ``wrap_model_call``/``awrap_model_call``
  (and the tool pair) as one capability: a middleware that defines only one side is put in
  *both* chains, and the missing side raises ``NotImplementedError`` on that execution path.
  The wrapper gives the missing side a pass-through, so a sync-only extension does not break
  ``ainvoke`` (it simply does not observe it — implement both sides to observe both paths).
* **Fail open without repeating side effects.** An exception raised by the extension's own
  code is recorded as an attributed diagnostic and the run continues as if the middleware
  were absent. For wrap hooks the ``handler`` handed to the inner middleware is tracked, so
  the wrapper knows whether the downstream model or tool call already happened: if it did,
  its result is returned (a second model call would double cost and side effects); if it did
  not, the wrapper calls the handler itself, once. Failures of the downstream call itself
  are not the extension's fault and propagate unchanged — the retry layer outside needs to
  see them as they are. LangGraph's control-flow exceptions (``GraphBubbleUp``: interrupts,
  parent commands) are not failures either and always propagate.
* **Cost one LangChain layer per run of wrap-only wrappers**, not one per wrapper:
  :func:`fuse_wrap_only_runs` (called by the composition point) lets the first wrapper of
  such a run call every member's own isolated wrap hook; see the section at the end.
* **Judge a CancelledError by its origin** (spec, Cancellation; see ``origin.py``). One the
  extension raised itself — an internal timeout built on cancellation — is contained like
  any other failure: otherwise it would end an otherwise healthy run as an error. A genuine
  cancellation of the run's task propagates, and so do ``KeyboardInterrupt``/``SystemExit``.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar
from weakref import WeakKeyDictionary

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from .diagnostics import DiagnosticsList, get_diagnostics
from .origin import is_host_cancellation

if TYPE_CHECKING:
    from deerflow_extension_api import Placement

__all__ = [
    "STATE_HOOKS",
    "WRAP_HOOK_PAIRS",
    "IsolatedMiddleware",
    "fuse_wrap_only_runs",
    "implemented_hooks",
    "node_slug",
]

#: The node hooks (``before_*`` / ``after_*``), each with its own sync and async side.
STATE_HOOKS: tuple[str, ...] = (
    "before_agent",
    "abefore_agent",
    "before_model",
    "abefore_model",
    "after_model",
    "aafter_model",
    "after_agent",
    "aafter_agent",
)
#: Wrap hooks as (sync, async) pairs LangChain treats as one capability.
WRAP_HOOK_PAIRS: tuple[tuple[str, str], ...] = (
    ("wrap_model_call", "awrap_model_call"),
    ("wrap_tool_call", "awrap_tool_call"),
)

_ASYNC_STATE_HOOKS = frozenset(STATE_HOOKS[1::2])
_PHASE = "middleware"
_MISSING: Any = object()
_MODEL_RESULTS = (ModelResponse, AIMessage, ExtendedModelResponse)
_TOOL_RESULTS = (ToolMessage, Command)
# What the wrapper contains: any Exception, and a CancelledError the extension raised itself
# (``is_host_cancellation`` sends a real cancellation of the run on). KeyboardInterrupt and
# SystemExit are never caught.
_CONTAINED = (Exception, asyncio.CancelledError)


def implemented_hooks(cls: type) -> frozenset[str]:
    """The hook names ``cls`` overrides, exactly as ``create_agent`` would detect them."""
    names = [*STATE_HOOKS, *(hook for pair in WRAP_HOOK_PAIRS for hook in pair)]
    return frozenset(name for name in names if getattr(cls, name, None) is not getattr(AgentMiddleware, name))


@functools.lru_cache(maxsize=1024)
def node_slug(text: str) -> str:
    """A graph-node-safe fragment: LangGraph reserves ``|`` and ``:`` in node names.

    Memoised: the same extension and class names are slugged for every contribution of
    every construction, four times each.
    """
    return re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_") or "x"


@dataclass(slots=True)
class _HandlerCalls:
    """What the tracked handler saw, so a failure can be resolved without a second call."""

    count: int = 0
    result: Any = _MISSING
    error: BaseException | None = None

    def track(self, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``handler`` as handed to the extension: every call and its outcome recorded."""

        def tracked(request: Any) -> Any:
            self.count += 1
            try:
                self.result, self.error = handler(request), None
            except BaseException as exc:
                self.result, self.error = _MISSING, exc
                raise
            return self.result

        return tracked

    def atrack(self, handler: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """:meth:`track` for the async chain."""

        async def tracked(request: Any) -> Any:
            self.count += 1
            try:
                self.result, self.error = await handler(request), None
            except BaseException as exc:
                self.result, self.error = _MISSING, exc
                raise
            return self.result

        return tracked


class IsolatedMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """Fail-open wrapper around one contributed middleware, attributed to ``extension``.

    ``IsolatedMiddleware(inner, extension=...)`` returns an instance of a subclass generated
    for ``type(inner)`` (cached), which defines only the hooks ``inner`` implements. This base
    class defines no hook at all, on purpose. ``index`` disambiguates node names when one
    stack holds the same class from the same extension more than once; the composition point
    assigns it deterministically so node names (which end up in checkpoints) are stable.
    """

    _hooks: ClassVar[frozenset[str]] = frozenset()
    _fused_group: tuple[IsolatedMiddleware, ...] = ()
    _group_calls: _GroupChains
    _group_axes: tuple[tuple[str, str], ...] = ()

    def __new__(
        cls,
        inner: AgentMiddleware,  # type: ignore[type-arg]
        *,
        extension: str,
        index: int = 1,
        diagnostics: DiagnosticsList | None = None,
        placement: Placement | None = None,
    ) -> IsolatedMiddleware:
        if not isinstance(inner, AgentMiddleware):
            raise TypeError(f"expected an AgentMiddleware, got {type(inner).__name__}")
        if isinstance(inner, IsolatedMiddleware):
            raise TypeError("middleware is already isolated")
        if cls is IsolatedMiddleware:
            cls = _isolated_class_for(type(inner))
        return object.__new__(cls)

    def __init__(
        self,
        inner: AgentMiddleware,  # type: ignore[type-arg]
        *,
        extension: str,
        index: int = 1,
        diagnostics: DiagnosticsList | None = None,
        placement: Placement | None = None,
    ) -> None:
        self._inner = inner
        self._extension = extension
        self._diagnostics = diagnostics
        self._placement = placement
        self._name = f"ext_{node_slug(extension)}_{node_slug(type(inner).__name__)}_{index}"
        # Mirrored once, here: create_agent reads these during construction, and a raising
        # property in extension code must become a diagnostic, not a failed build.
        self.tools = list(self._mirror("tools", []))
        self.state_schema = self._mirror("state_schema", AgentMiddleware.state_schema)
        self.transformers = tuple(self._mirror("transformers", ()))
        self.trace_policy = self._mirror("trace_policy", None)

    # -- attribution -----------------------------------------------------------------------
    @property
    def inner(self) -> AgentMiddleware:  # type: ignore[type-arg]
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
    def name(self) -> str:
        """A unique, LangGraph-valid node-name prefix: ``ext_<slug>_<ClassName>_<n>``."""
        return self._name

    @property
    def wrapped_hooks(self) -> frozenset[str]:
        """The hooks the inner middleware implements, as ``create_agent`` would detect them.

        The same whether or not this wrapper is part of a fused group (see
        :func:`fuse_wrap_only_runs`), where its class may expose more hooks (a group head) or
        none (a member the head runs); ordering checks read this, not the class.
        """
        return type(self)._hooks

    @property
    def fused_group(self) -> tuple[IsolatedMiddleware, ...]:
        """The wrappers this one runs as one LangChain layer, itself first; empty unless it
        heads a fused group."""
        return self._fused_group

    def __repr__(self) -> str:
        return f"IsolatedMiddleware({self._inner!r}, extension={self._extension!r})"

    # -- failure handling ------------------------------------------------------------------
    def _mirror(self, attr: str, default: Any) -> Any:
        try:
            value = getattr(self._inner, attr, default)
        except _CONTAINED as exc:  # a property in extension code
            if is_host_cancellation(exc):
                raise
            self._fail(attr, exc)
            return default
        return default if value is None and default is not None else value

    def _fail(self, hook: str, exc: BaseException) -> None:
        diagnostics = self._diagnostics if self._diagnostics is not None else get_diagnostics()
        diagnostics.record(
            self._extension,
            _PHASE,
            f"{type(self._inner).__name__}.{hook} raised {type(exc).__name__}: {exc}",
            exc=exc,
        )

    def _bad_result(self, hook: str, result: Any) -> None:
        self._fail(hook, TypeError(f"returned {type(result).__name__}, which is not a valid {hook} result"))

    # -- node hooks ------------------------------------------------------------------------
    def _run_state_hook(self, hook: str, state: Any, runtime: Any) -> Any:
        try:
            update = getattr(self._inner, hook)(state, runtime)
        except GraphBubbleUp:
            raise
        except _CONTAINED as exc:
            if is_host_cancellation(exc):
                raise
            self._fail(hook, exc)
            return None
        return self._checked_update(hook, update)

    async def _arun_state_hook(self, hook: str, state: Any, runtime: Any) -> Any:
        try:
            update = await getattr(self._inner, hook)(state, runtime)
        except GraphBubbleUp:
            raise
        except _CONTAINED as exc:
            if is_host_cancellation(exc):
                raise
            self._fail(hook, exc)
            return None
        return self._checked_update(hook, update)

    def _checked_update(self, hook: str, update: Any) -> Any:
        # A malformed update would fail later inside LangGraph, far from the extension that
        # produced it; reject it here, attributed, and apply nothing.
        if update is None or isinstance(update, (Mapping, Command)):
            return update
        self._bad_result(hook, update)
        return None

    # -- wrap hooks ------------------------------------------------------------------------
    def _run_wrap_hook(self, hook: str, request: Any, handler: Callable[[Any], Any]) -> Any:
        calls = _HandlerCalls()
        result, failure = _MISSING, None
        try:
            result = getattr(self._inner, hook)(request, calls.track(handler))
        except GraphBubbleUp:
            raise
        except _CONTAINED as exc:
            if exc is calls.error:
                raise  # the downstream call failed: not the extension's fault
            if is_host_cancellation(exc):
                raise  # the run itself is being cancelled (stop, shutdown)
            failure = exc
        settled = self._settle(hook, calls, result, failure)
        return handler(request) if settled is _MISSING else settled

    async def _arun_wrap_hook(self, hook: str, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        calls = _HandlerCalls()
        result, failure = _MISSING, None
        try:
            result = await getattr(self._inner, hook)(request, calls.atrack(handler))
        except GraphBubbleUp:
            raise
        except _CONTAINED as exc:
            if exc is calls.error:
                raise  # the downstream call failed: not the extension's fault
            if is_host_cancellation(exc):
                raise  # the run itself is being cancelled (stop, shutdown)
            failure = exc
        settled = self._settle(hook, calls, result, failure)
        return await handler(request) if settled is _MISSING else settled

    def _settle(self, hook: str, calls: _HandlerCalls, result: Any, failure: BaseException | None) -> Any:
        """The wrap hook's outcome once the extension's code has returned or raised.

        Its own result when valid; otherwise the failure is attributed and the run gets what
        it would have got without the extension: the downstream call's outcome when it
        already happened, or ``_MISSING`` when it did not (the caller then makes it, once).
        """
        if failure is None:
            if isinstance(result, _VALID_RESULTS[hook]):
                return result
            self._bad_result(hook, result)
        else:
            self._fail(hook, failure)
        if calls.count == 0:
            return _MISSING
        if calls.error is not None:
            # The last downstream call failed and the extension then raised something else:
            # surface the downstream failure, as if the extension were absent.
            raise calls.error
        return calls.result


_VALID_RESULTS: dict[str, tuple[type, ...]] = {
    "wrap_model_call": _MODEL_RESULTS,
    "awrap_model_call": _MODEL_RESULTS,
    "wrap_tool_call": _TOOL_RESULTS,
    "awrap_tool_call": _TOOL_RESULTS,
}


# -- per-class generation --------------------------------------------------------------------
_classes: WeakKeyDictionary[type, type[IsolatedMiddleware]] = WeakKeyDictionary()
_classes_lock = threading.Lock()


def _isolated_class_for(inner_cls: type) -> type[IsolatedMiddleware]:
    with _classes_lock:
        cls = _classes.get(inner_cls)
        if cls is None:
            cls = _build_class(inner_cls)
            _classes[inner_cls] = cls
        return cls


def _build_class(inner_cls: type) -> type[IsolatedMiddleware]:
    hooks = implemented_hooks(inner_cls)
    namespace: dict[str, Any] = {"_hooks": hooks, "__module__": __name__, "__qualname__": ""}
    for hook in STATE_HOOKS:
        if hook in hooks:
            namespace[hook] = _state_method(hook, is_async=hook in _ASYNC_STATE_HOOKS)
    for sync_hook, async_hook in WRAP_HOOK_PAIRS:
        if sync_hook not in hooks and async_hook not in hooks:
            continue
        sync_impl = _wrap_method if sync_hook in hooks else _sync_pass_through
        async_impl = _awrap_method if async_hook in hooks else _async_pass_through
        namespace[sync_hook] = sync_impl(sync_hook)
        namespace[async_hook] = async_impl(async_hook)
    for hook in hooks:
        jump = getattr(getattr(inner_cls, hook, None), "__can_jump_to__", None)
        if jump is not None and hook in namespace:
            namespace[hook].__can_jump_to__ = list(jump)
    name = f"Isolated{inner_cls.__name__}"
    namespace["__qualname__"] = name
    return type(name, (IsolatedMiddleware,), namespace)


def _state_method(hook: str, *, is_async: bool) -> Callable[..., Any]:
    if is_async:

        async def async_hook(self: IsolatedMiddleware, state: Any, runtime: Any) -> Any:
            return await self._arun_state_hook(hook, state, runtime)

        async_hook.__name__ = hook
        return async_hook

    def sync_hook(self: IsolatedMiddleware, state: Any, runtime: Any) -> Any:
        return self._run_state_hook(hook, state, runtime)

    sync_hook.__name__ = hook
    return sync_hook


def _wrap_method(hook: str) -> Callable[..., Any]:
    def wrap(self: IsolatedMiddleware, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._run_wrap_hook(hook, request, handler)

    wrap.__name__ = hook
    return wrap


def _awrap_method(hook: str) -> Callable[..., Any]:
    async def awrap(self: IsolatedMiddleware, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self._arun_wrap_hook(hook, request, handler)

    awrap.__name__ = hook
    return awrap


def _sync_pass_through(hook: str) -> Callable[..., Any]:
    def pass_through(self: IsolatedMiddleware, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)

    pass_through.__name__ = hook
    return pass_through


def _async_pass_through(hook: str) -> Callable[..., Any]:
    async def pass_through(self: IsolatedMiddleware, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(request)

    pass_through.__name__ = hook
    return pass_through


# -- fusing runs of wrap-only wrappers into one LangChain layer ------------------------------
#
# ``create_agent`` pays per middleware *layer*: it decorates every wrap hook with langsmith's
# ``traceable`` (an ``inspect.signature`` per hook at build time; on the async path two
# thread-pool hops and a task per call, even with tracing off), and each layer is one more
# link in the composed chain. Ten no-op wrap-only contributions cost a lead run ~5 ms of
# construction and ~0.3 ms per layer per model call. A run of consecutive wrappers in one
# placement that only wrap (no node hooks, tools, state schema, transformers or trace policy
# of their own) is therefore handed to LangChain as one layer: the first wrapper of the run
# (the *head*) exposes the run's wrap hooks and calls every member's own isolated wrap hook
# through LangChain's own composers, so nesting, result normalisation and command
# accumulation between members are exactly what they were as separate layers; the other
# members stay in the stack in their place (attribution, descriptor, ordering, node names)
# but expose no hook, so LangChain builds nothing for them. Every member is still isolated
# and attributed separately. What changes: LangSmith records one span per group, named
# after the head, instead of one per member.

_WRAP_HOOKS = frozenset(hook for pair in WRAP_HOOK_PAIRS for hook in pair)


def _langchain_composers() -> Mapping[str, Callable[[Any], Any]] | None:
    try:
        from langchain.agents.factory import (
            _chain_async_model_call_handlers,
            _chain_async_tool_call_wrappers,
            _chain_model_call_handlers,
            _chain_tool_call_wrappers,
        )
    except ImportError:  # a LangChain without them: no fusing, every wrapper its own layer
        return None
    return {
        "wrap_model_call": _chain_model_call_handlers,
        "awrap_model_call": _chain_async_model_call_handlers,
        "wrap_tool_call": _chain_tool_call_wrappers,
        "awrap_tool_call": _chain_async_tool_call_wrappers,
    }


_COMPOSERS = _langchain_composers()


def _fusible(mw: Any) -> bool:
    cls = type(mw)
    return (
        isinstance(mw, IsolatedMiddleware)
        and not mw._fused_group
        and cls is _classes.get(type(mw._inner))  # a plain per-class wrapper, not a member
        and bool(mw.wrapped_hooks)
        and mw.wrapped_hooks <= _WRAP_HOOKS
        and not mw.tools
        and mw.state_schema is AgentMiddleware.state_schema  # type: ignore[misc]
        and not mw.transformers
        and mw.trace_policy is None
    )


def fuse_wrap_only_runs(stack: Sequence[Any]) -> list[Any]:
    """``stack`` with each run of two or more consecutive fusible wrappers in one placement
    handed to LangChain as one layer (see above). Order and membership are unchanged: the
    result holds a wrapper for every entry of ``stack``, at the same index."""
    if _COMPOSERS is None:
        return list(stack)
    result: list[Any] = []
    run: list[IsolatedMiddleware] = []

    def flush() -> None:
        result.extend(_fused(run) if len(run) > 1 else run)
        run.clear()

    for mw in stack:
        if not _fusible(mw):
            flush()
            result.append(mw)
            continue
        if run and mw.placement is not run[0].placement:
            flush()
        run.append(mw)
    flush()
    return result


def _fused(run: Sequence[IsolatedMiddleware]) -> list[IsolatedMiddleware]:
    assert _COMPOSERS is not None
    head_inner = type(run[0]._inner)
    hooks = frozenset().union(*(mw.wrapped_hooks for mw in run))
    axes = tuple(pair for pair in WRAP_HOOK_PAIRS if hooks & set(pair))
    head = _clone(run[0], _group_head_class(head_inner, axes))
    members = [head, *(_clone(mw, _group_member_class(type(mw._inner))) for mw in run[1:])]
    head._group_calls = _GroupChains(
        {pair: [mw for mw in members if mw.wrapped_hooks & set(pair)] for pair in axes}
    )
    head._fused_group = tuple(members)
    head._group_axes = axes
    return members


class _GroupChains:
    """A fused group's composed chain for each wrap hook, composed when that hook first runs.

    Speed: composing a chain through LangChain's composer costs tens of microseconds per
    hook per construction, and most chains never run: the async path never calls the sync
    pair, and a run that calls no tool never calls the tool pair. The chain is the same
    whenever it is composed (the members are fixed when the group is); two threads racing
    on a first call would each compose an equal chain, and either may be kept.
    """

    __slots__ = ("_chains", "_members")

    def __init__(self, members: Mapping[tuple[str, str], Sequence[IsolatedMiddleware]]) -> None:
        self._members = {hook: on_axis for pair, on_axis in members.items() for hook in pair}
        self._chains: dict[str, Callable[..., Any]] = {}

    def __getitem__(self, hook: str) -> Callable[..., Any]:
        chain = self._chains.get(hook)
        if chain is None:
            assert _COMPOSERS is not None
            # Each member's own isolated hook (its per-class wrapper's), bound to it.
            chain = _COMPOSERS[hook](
                [getattr(_classes[type(mw._inner)], hook).__get__(mw) for mw in self._members[hook]]
            )
            self._chains[hook] = chain
        return chain


def _clone(mw: IsolatedMiddleware, cls: type[IsolatedMiddleware]) -> IsolatedMiddleware:
    # A new wrapper of ``cls`` over the same state: nothing is mirrored from the extension
    # again (a raising property would be reported twice), and the caller's objects are left
    # as they were.
    clone = object.__new__(cls)
    clone.__dict__.update(mw.__dict__)
    return clone


_heads: WeakKeyDictionary[type, dict[tuple[tuple[str, str], ...], type[IsolatedMiddleware]]] = WeakKeyDictionary()
_members: WeakKeyDictionary[type, type[IsolatedMiddleware]] = WeakKeyDictionary()


def _group_head_class(inner_cls: type, axes: tuple[tuple[str, str], ...]) -> type[IsolatedMiddleware]:
    with _classes_lock:
        by_axes = _heads.setdefault(inner_cls, {})
        cls = by_axes.get(axes)
        if cls is None:
            namespace: dict[str, Any] = {"_hooks": implemented_hooks(inner_cls), "__module__": __name__}
            for pair in axes:
                namespace[pair[0]] = _group_method(pair[0])
                namespace[pair[1]] = _agroup_method(pair[1])
            name = f"Isolated{inner_cls.__name__}Group"
            namespace["__qualname__"] = name
            cls = by_axes[axes] = type(name, (IsolatedMiddleware,), namespace)
        return cls


def _group_member_class(inner_cls: type) -> type[IsolatedMiddleware]:
    with _classes_lock:
        cls = _members.get(inner_cls)
        if cls is None:
            name = f"Isolated{inner_cls.__name__}InGroup"
            namespace = {"_hooks": implemented_hooks(inner_cls), "__module__": __name__, "__qualname__": name}
            cls = _members[inner_cls] = type(name, (IsolatedMiddleware,), namespace)
        return cls


def _group_method(hook: str) -> Callable[..., Any]:
    def wrap(self: IsolatedMiddleware, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._group_calls[hook](request, handler)

    wrap.__name__ = hook
    return wrap


def _agroup_method(hook: str) -> Callable[..., Any]:
    async def awrap(self: IsolatedMiddleware, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self._group_calls[hook](request, handler)

    awrap.__name__ = hook
    return awrap
