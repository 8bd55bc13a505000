"""Run a fused group inside the host wrap layer just before it, instead of as a layer of its own.

Fusing (:func:`~.wrap_fusion.fuse_wrap_only_runs`) makes a run of wrap-only contributions one
LangChain layer. Even so, ``create_agent`` pays for that layer at every construction: it
decorates each of the layer's four wrap hooks with langsmith's ``traceable`` (two
``inspect.signature`` calls and several ``functools.wraps`` each, ~30 µs), and it normalises
the layer's result on every call. That was the largest per-construction cost ten no-op
extensions still added to a lead run.

LangChain nests the layers of one axis (model calls, tool calls) in stack order, counting
only the middlewares that wrap that axis. So when the nearest layer before a group on an axis
is a *host* middleware, nothing else wraps that axis between the two, and the host layer's
hook composed with the group's chain, by LangChain's own composer, is exactly the nesting the
two layers had, retries and command accumulation included. That is what this module builds:
the host middleware is copied (the caller's object is left as it was), its two hooks of the
axis become the composition, and the group head stops exposing that axis, so LangChain builds
nothing for it. An axis whose nearest layer is another contribution keeps the group's own
layer.

Tracing is kept: the group still records a LangSmith span named exactly as ``create_agent``
would have named it (``<head name>.<hook>``), with the same input scrubbing and call-time
trace policy, through a ``traceable`` made once per hook for the process instead of per
construction. The span nests under the host layer's span, as the separate layer's did.

Everything here uses LangChain's private composers and trace helpers
(``adapters/langchain_private.py``); without them nothing is carried and every group stays a
layer.
"""

from __future__ import annotations

import copy
import copyreg
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple

from langchain.agents.middleware import AgentMiddleware

from deerflow_ext.adapters.langchain_private import wrap_trace_kwargs
from deerflow_ext.memo import ClassMemo

from .hooks import WRAP_HOOK_PAIRS
from .isolation import IsolatedMiddleware
from .mirror import group_head_class, group_member_class, group_method
from .wrap_fusion import COMPOSERS, FusedWrapper, rewrapped

__all__ = ["Carry", "carry_fused_groups", "carry_groups", "carry_plan"]


class Carry(NamedTuple):
    """What carrying does to one fused group: the axes its head keeps as its own layer, and
    the host layer (an index in the stack) that carries each of the other axes."""

    head: int
    kept: tuple[tuple[str, str], ...]
    carriers: tuple[tuple[tuple[str, str], int], ...]
    exposed: type[FusedWrapper]  # the head's class once carried: it exposes only ``kept``


def carry_plan(stack: Sequence[Any]) -> tuple[Carry, ...]:
    """Which host layer carries which axis of each fused group in ``stack``: the decision
    :func:`carry_groups` carries out. Empty without LangChain's composers and trace helper.

    Groups are decided in stack order, each against the classes the earlier ones left: a
    head that no longer exposes an axis is not a layer on it.
    """
    if COMPOSERS is None or _traced_group_hooks() is None:
        return ()
    classes = [type(mw) for mw in stack]
    plan: list[Carry] = []
    for index, head in enumerate(stack):
        if not isinstance(head, FusedWrapper) or not head.fused_group:
            continue
        kept: list[tuple[str, str]] = []
        carriers: list[tuple[tuple[str, str], int]] = []
        for pair in head._group_axes:
            at = _nearest_layer(classes, index, pair)
            if at is None or issubclass(classes[at], IsolatedMiddleware):
                kept.append(pair)
            else:
                carriers.append((pair, at))
        if carriers:
            classes[index] = exposed = _exposed_class(head, tuple(kept))
            plan.append(Carry(index, tuple(kept), tuple(carriers), exposed))
    return tuple(plan)


def carry_groups(stack: Sequence[Any], plan: Sequence[Carry]) -> list[Any]:
    """``stack`` with each fused group carried as ``plan`` (:func:`carry_plan` of a stack of
    this shape) says. Membership and order are unchanged; a carrier is replaced by a copy of
    itself, the group head (created by this composition) by a copy exposing fewer hooks.
    """
    traced = _traced_group_hooks()
    result = list(stack)
    if not plan:
        return result
    assert COMPOSERS is not None and traced is not None  # carry_plan decided nothing otherwise
    for index, kept, carriers, exposed in plan:
        head = result[index]
        for pair, at in carriers:
            original = result[at]
            carrier = (_copiers.get(type(original)) or _copiers(type(original)))(original)
            for hook in pair:
                carried = _carried(traced[hook], head, hook)
                setattr(carrier, hook, COMPOSERS[hook]([getattr(carrier, hook), carried]))
            result[at] = carrier
        result[index] = _exposing(head, kept, exposed)
    return result


def carry_fused_groups(stack: Sequence[Any]) -> list[Any]:
    """``stack`` with each fused group carried by the host layer before it, axis by axis:
    :func:`carry_groups` over :func:`carry_plan`."""
    return carry_groups(stack, carry_plan(stack))


def _exposed_class(head: FusedWrapper, axes: tuple[tuple[str, str], ...]) -> type[FusedWrapper]:
    """The class of a group head that exposes only ``axes`` (none: a plain member's)."""
    inner_cls = type(head.inner)
    if axes:
        return group_head_class(FusedWrapper, inner_cls, axes)
    return group_member_class(FusedWrapper, inner_cls)


def _exposing(head: FusedWrapper, axes: tuple[tuple[str, str], ...], cls: type[FusedWrapper]) -> FusedWrapper:
    """A copy of group ``head`` of ``cls``, which exposes only ``axes`` (none: a plain member).

    A copy rather than a class swap on the head itself: the carried chains keep calling the
    original head, whose class still runs the whole group.
    """
    exposed = rewrapped(head, cls)
    exposed._group_axes = axes
    exposed._fused_group = (exposed, *head.fused_group[1:])
    return exposed


def _plain_copy(mw: Any) -> Any:
    cls: Any = type(mw)
    clone = cls.__new__(cls)
    clone.__dict__.update(mw.__dict__)
    return clone


def _copier(cls: type) -> Callable[[Any], Any]:
    """How a carrier of class ``cls`` is copied: what ``copy.copy`` makes of it, without its
    generic protocol (~14K instructions a copy) for a class that uses none of it, keeping all
    its state in its ``__dict__``; ``copy.copy`` itself for any other."""
    plain = (
        getattr(cls, "__copy__", None) is None
        and cls not in copyreg.dispatch_table
        and getattr(cls, "__reduce_ex__", None) is object.__reduce_ex__
        and getattr(cls, "__reduce__", None) is object.__reduce__
        and getattr(cls, "__getstate__", None) is object.__getstate__
        and not hasattr(cls, "__setstate__")
        and not hasattr(cls, "__getnewargs_ex__")
        and not hasattr(cls, "__getnewargs__")
        and all(_slots(klass) <= {"__dict__", "__weakref__"} for klass in cls.__mro__)
        and "__dict__" in dir(cls)
    )
    return _plain_copy if plain else copy.copy


def _slots(cls: type) -> set[str]:
    slots = cls.__dict__.get("__slots__", ())
    return {slots} if isinstance(slots, str) else set(slots)


_copiers: ClassMemo[Callable[[Any], Any]] = ClassMemo(_copier)


def _nearest_layer(classes: Sequence[type], index: int, pair: tuple[str, str]) -> int | None:
    """Index of the nearest middleware before ``index`` that LangChain nests on ``pair``'s axis.

    LangChain's own test: the class overrides either hook of the pair.
    """
    for at in range(index - 1, -1, -1):
        cls = classes[at]
        if any(getattr(cls, hook, None) is not getattr(AgentMiddleware, hook) for hook in pair):
            return at
    return None


def _carried(traced: Callable[..., Any], head: IsolatedMiddleware, hook: str) -> Callable[..., Any]:
    """The group's chain for ``hook`` as a ``(request, handler)`` callable, traced per call.

    A call that LangSmith would not record skips the ``traceable`` wrapper: deciding that
    there is nothing to record costs it ~25 µs a call (context copies, a parent-run lookup,
    its run container), once per model or tool call per carried group, to run the same chain.
    """
    if hook.startswith("a"):
        return _ACarried(traced, head, hook, group_method(hook))  # what `traced` decorates
    return _Carried(traced, head, hook, group_method(hook))


class _Carried:
    """:func:`_carried`'s callable for a sync hook.

    An object rather than a closure: one object the garbage collector counts, where a
    closure over the same five names was seven (the function, its cells, their tuple), per
    carried hook and construction. Every object alive at the model call brings the next
    collection closer, and collections were ~40% of what ten extensions added to a run's
    time."""

    __slots__ = ("_head", "_hook", "_plain", "_traced", "_untraced")

    def __init__(
        self, traced: Callable[..., Any], head: IsolatedMiddleware, hook: str, plain: Callable[..., Any]
    ) -> None:
        self._traced = traced
        self._head = head
        self._hook = hook
        self._plain = plain
        self._untraced = _untraced_check()

    def __call__(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if self._untraced():
            return self._plain(self._head, request, handler)
        return self._traced(self._head, request, handler, langsmith_extra=_span(self._head, self._hook))


class _ACarried(_Carried):
    """:class:`_Carried` for an async hook."""

    __slots__ = ()

    async def __call__(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        if self._untraced():
            return await self._plain(self._head, request, handler)
        return await self._traced(self._head, request, handler, langsmith_extra=_span(self._head, self._hook))


def _span(head: IsolatedMiddleware, hook: str) -> dict[str, Any]:
    """The span's name, as ``create_agent`` names a layer's (made only for a traced call)."""
    return {"name": f"{head.name}.{hook}"}


@functools.cache
def _untraced_check() -> Callable[[], bool]:
    """Whether a ``traceable`` call made here and now would record nothing.

    langsmith's own rule for a call with no ``enabled`` override, no ``config`` argument and
    no explicit parent: it traces when ``tracing_is_enabled()`` says so (the context, then
    the environment) or when a run tree is current, which a context that disables tracing
    inside a trace still has.
    """
    from langsmith.run_helpers import get_current_run_tree
    from langsmith.utils import tracing_is_enabled

    def untraced() -> bool:
        return not tracing_is_enabled() and get_current_run_tree() is None

    return untraced


@functools.cache
def _traced_group_hooks() -> Mapping[str, Callable[..., Any]] | None:
    """Each wrap hook of a group head, decorated with ``traceable`` once for the process.

    The decoration ``create_agent`` applies per layer and construction: its input scrubbing
    (no ``handler``, no ``runtime``) and the trace policy resolved at call time. Fusible
    members declare no trace policy of their own, so the process-wide one applies, as it did.
    Two threads racing on the first call would each build an equal table; either is kept.
    """
    try:
        from langsmith import traceable
    except ImportError:
        return None
    kwargs = wrap_trace_kwargs(AgentMiddleware())
    if kwargs is None:
        return None
    scrub = kwargs["process_inputs"]

    def process_inputs(inputs: dict[str, Any]) -> Any:
        return scrub({key: value for key, value in inputs.items() if key != "self"})

    decorate = traceable(process_inputs=process_inputs, process_outputs=kwargs["process_outputs"])
    # The head's own group methods (mirror.py), now called with the head passed in.
    return {sync: decorate(group_method(sync)) for sync, _ in WRAP_HOOK_PAIRS} | {
        asynchronous: decorate(group_method(asynchronous)) for _, asynchronous in WRAP_HOOK_PAIRS
    }
