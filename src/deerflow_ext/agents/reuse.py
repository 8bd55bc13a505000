"""One compiled graph for every construction of the same shape, run through per-run slots.

Why: compiling a ``create_agent`` graph (``StateGraph.compile``, a node per hook, langsmith's
``traceable`` per wrap layer, signature and type-hint inspection) was the largest single cost
of a trivial Gateway run (~27% of the busy event loop), and nothing in it depends
on the run. The spec's construction still happens per run: contributors are called, the
stack is composed and the descriptor emitted every time (``agents.lead``). Only the
compiled graph is shared, and it holds no run's middleware: it is compiled over *slots*, one
per stack position, each of a class generated per middleware class with exactly the hooks
that class overrides (``__can_jump_to__`` kept), so LangChain builds the same nodes, edges
and wrapper chains it would build for the run's own stack. A slot forwards each call to the
run's middleware at its position, which the run's runtime context carries under
:data:`SLOTS_KEY` (:class:`BoundGraph` puts it there). The model is the run's too: the
first slot that wraps model calls hands the run's model on in the request, so the compiled
graph's model is never called.

The shape is everything ``create_agent`` reads at compile time: the model's class, the
tools, the system prompt, the checkpointer, the store and, per middleware, its class, name, state
schema, tools, trace policy and stream transformers (by identity: the cache entry keeps
them alive, so an identity can never be reused while it is a key). A construction of any
other shape compiles a graph of its own, as before; one whose middleware cannot be slotted
(a hook whose parameters are not LangChain's usual two) is compiled with its own stack.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel

from deerflow_ext.extensions.composition.hook_classes import StandIn, hook_class, hook_method, jump_targets
from deerflow_ext.extensions.composition.hooks import (
    STATE_HOOKS,
    WRAP_HOOK_PAIRS,
    implemented_hooks,
)
from deerflow_ext.memo import ClassMemo, Memo

__all__ = ["SLOTS_KEY", "BoundGraph", "CompiledGraphs", "RunStack"]

#: Where the run's middleware and model travel in its runtime context.
SLOTS_KEY = "__deerflow_run_stack__"

_MODEL_HOOKS = frozenset(WRAP_HOOK_PAIRS[0])
_STATE_PARAMETERS = ("state", "runtime")


@dataclass(frozen=True, slots=True)
class RunStack:
    """What one construction contributes to a shared graph: its stack and its model."""

    middleware: tuple[AgentMiddleware[Any, Any, Any], ...]
    model: BaseChatModel


class BoundGraph:
    """A shared compiled graph bound to one construction's :class:`RunStack`.

    The run methods put the stack into the runtime context they are given (the caller's
    dict, so a hook that keeps something in the context sees it across goal continuations);
    everything else (state, history, drawing) is the compiled graph's own.
    """

    __slots__ = ("graph", "run_stack")

    def __init__(self, graph: Any, run_stack: RunStack) -> None:
        self.graph = graph
        self.run_stack = run_stack

    def _bind(self, context: Any) -> dict[str, Any]:
        if context is None:
            context = {}
        elif not isinstance(context, dict):
            raise TypeError(f"a reused graph's runtime context is a dict, not {type(context).__name__}")
        context[SLOTS_KEY] = self.run_stack
        bound: dict[str, Any] = context
        return bound

    def astream(self, input: Any, config: Any = None, *, context: Any = None, **kwargs: Any) -> Any:
        return self.graph.astream(input, config, context=self._bind(context), **kwargs)

    def stream(self, input: Any, config: Any = None, *, context: Any = None, **kwargs: Any) -> Any:
        return self.graph.stream(input, config, context=self._bind(context), **kwargs)

    def astream_events(self, input: Any, config: Any = None, *, context: Any = None, **kwargs: Any) -> Any:
        return self.graph.astream_events(input, config, context=self._bind(context), **kwargs)

    async def ainvoke(self, input: Any, config: Any = None, *, context: Any = None, **kwargs: Any) -> Any:
        return await self.graph.ainvoke(input, config, context=self._bind(context), **kwargs)

    def invoke(self, input: Any, config: Any = None, *, context: Any = None, **kwargs: Any) -> Any:
        return self.graph.invoke(input, config, context=self._bind(context), **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)


@dataclass(frozen=True, slots=True)
class _Entry:
    graph: Any
    keep: tuple[Any, ...]  # what the key names by identity, alive as long as the entry


class CompiledGraphs:
    """A bounded table of compiled graphs by construction shape; safe across threads.

    One per builder (the Gateway's lead host, its subagent builder): a host's shapes are
    few (its config is fixed; an extension changes the shape only by what it contributes).
    """

    def __init__(self, maxsize: int = 16) -> None:
        #: By shape (``memo.py``: past ``maxsize`` shapes it starts over, and each compiles again).
        self._entries: Memo[tuple[Any, ...], _Entry] = Memo(limit=maxsize)

    def __len__(self) -> int:
        return len(self._entries)

    def bind(
        self,
        stack: Sequence[AgentMiddleware[Any, Any, Any]],
        *,
        model: BaseChatModel,
        tools: Sequence[Any],
        system_prompt: str,
        checkpointer: Any,
        compile: Callable[[list[AgentMiddleware[Any, Any, Any]]], Any],
        store: Any = None,
    ) -> BoundGraph | None:
        """The graph for ``stack``'s shape bound to this construction; ``None`` when the
        stack cannot be slotted (the caller compiles it as it is).

        ``compile`` builds a graph over the given middleware with this construction's
        model, tools, prompt, checkpointer and store; it runs once per shape.
        """
        # One pass over the stack (every construction binds, so it is written out inline):
        # each middleware's slot class, and what create_agent reads of it besides its class's
        # hooks, by value (class, name) and by identity (schema, policy, tools, transformers).
        classes: list[Any] = []
        keep: list[Any] = [tuple(tools), checkpointer, store]
        key: list[Any] = [type(model), tuple(map(id, tools)), system_prompt, id(checkpointer), id(store)]
        known_slot = _slot_classes.get
        for m in stack:
            mcls = type(m)
            cls = known_slot(mcls, _UNSEEN)
            if cls is _UNSEEN:
                cls = _slot_classes.load(mcls)
            if cls is None:
                return None
            classes.append(cls)
            objects = (m.state_schema, m.trace_policy, *getattr(m, "tools", ()), *getattr(m, "transformers", ()))
            keep.extend(objects)
            key.append((mcls, m.name, tuple(map(id, objects))))
        swapper = next((i for i, cls in enumerate(classes) if cls._wraps_model_calls), None)
        if swapper is None:
            return None  # nothing would hand the run's model on
        run_stack = RunStack(tuple(stack), model)
        shape = tuple(key)
        entry = self._entries.get(shape)
        if entry is not None:
            return BoundGraph(entry.graph, run_stack)
        slots: list[AgentMiddleware[Any, Any, Any]] = []
        for index, (cls, middleware) in enumerate(zip(classes, stack, strict=True)):
            slots.append(cls(index, middleware, swaps_model=index == swapper))
        # Two constructions racing on a new shape compile one each; either is kept.
        entry = self._entries.put(shape, _Entry(compile(slots), tuple(keep)))
        return BoundGraph(entry.graph, run_stack)


# -- slot classes ------------------------------------------------------------------------------


class _Slot(StandIn):
    """Position ``index`` of a shared graph's stack; generated subclasses add the hooks."""

    _wraps_model_calls = False

    def __init__(self, index: int, real: AgentMiddleware[Any, Any, Any], *, swaps_model: bool) -> None:
        super().__init__(real.name, like=real)
        self._index = index
        self._swaps_model = swaps_model

    def _target(self, runtime: Any) -> AgentMiddleware[Any, Any, Any]:
        return _run_stack(runtime).middleware[self._index]

    def resolve(self, runtime: Any) -> Any:
        """The run's middleware at this slot's position (for what calls a stand-in's
        methods outside LangChain's hooks: node fusion's model bracket)."""
        return self._target(runtime)

    def _request(self, request: Any, *, model_call: bool) -> tuple[AgentMiddleware[Any, Any, Any], Any]:
        run_stack = _run_stack(request.runtime)
        if model_call and self._swaps_model:
            request = request.override(model=run_stack.model)
        return run_stack.middleware[self._index], request


def _run_stack(runtime: Any) -> RunStack:
    context = getattr(runtime, "context", None)
    run_stack = context.get(SLOTS_KEY) if isinstance(context, Mapping) else None
    if not isinstance(run_stack, RunStack):
        raise RuntimeError("a reused agent graph was run without its construction's stack (BoundGraph binds it)")
    return run_stack


#: The slot class standing for each middleware class (cached weakly), or ``None`` if a hook
#: of the class takes parameters LangGraph would inject differently into a slot's
#: (``_build_slot_class``). Read for every middleware of every construction: a hit is one
#: dict lookup (``memo.py``); only a class seen for the first time is built.
_slot_classes: ClassMemo[type | None] = ClassMemo(lambda cls: _build_slot_class(cls))
_UNSEEN: Any = object()


def _build_slot_class(cls: type) -> type | None:
    hooks = implemented_hooks(cls)
    methods: dict[str, Callable[..., Any]] = {}
    for hook in hooks:
        parameters = _parameters(getattr(cls, hook))
        if hook in STATE_HOOKS:
            if tuple(parameters) != _STATE_PARAMETERS:
                return None
            methods[hook] = hook_method(hook, _forward_state)
        else:
            if len(parameters) != 2:
                return None
            methods[hook] = hook_method(hook, _forward_wrap)
    attributes = {"_wraps_model_calls": bool(hooks & _MODEL_HOOKS)}  # may hand on the run's model
    return hook_class(_Slot, f"Slot{cls.__name__}", methods, jumps=jump_targets(cls, hooks), attributes=attributes)


def _parameters(method: Any) -> list[str]:
    try:
        params = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p.name for p in params[1:] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _forward_state(slot: _Slot, hook: str, state: Any, runtime: Any) -> Any:
    """A slot's node hook: the run's middleware's own."""
    return getattr(slot._target(runtime), hook)(state, runtime)


def _forward_wrap(slot: _Slot, hook: str, request: Any, handler: Callable[[Any], Any]) -> Any:
    """A slot's wrap hook: the run's middleware's own, handed the run's model on a model call."""
    target, request = slot._request(request, model_call=hook in _MODEL_HOOKS)
    return getattr(target, hook)(request, handler)
