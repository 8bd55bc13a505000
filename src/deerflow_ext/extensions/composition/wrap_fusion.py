"""Fusing runs of wrap-only wrappers into one LangChain layer.

``create_agent`` pays per middleware *layer*: it decorates every wrap hook with langsmith's
``traceable`` (an ``inspect.signature`` per hook at build time; on the async path two
thread-pool hops and a task per call, even with tracing off), and each layer is one more
link in the composed chain. Ten no-op wrap-only contributions cost a lead run ~5 ms of
construction and ~0.3 ms per layer per model call. A run of consecutive wrappers in one
placement that only wrap (no node hooks, tools, state schema, transformers or trace policy
of their own) is therefore handed to LangChain as one layer: the first wrapper of the run
(the *head*) exposes the run's wrap hooks and calls every member's own isolated wrap hook
through LangChain's own composers (``adapters/langchain_private.py``), so nesting, result
normalisation and command accumulation between members are exactly what they were as
separate layers (between observing members there is nothing to normalise or collect, so
they are nested plainly: ``GroupChains``); the other members stay in the stack in their place (attribution,
descriptor, ordering, node names) but expose no hook, so LangChain builds nothing for them.
Every member is still isolated and attributed separately. What changes: LangSmith records
one span per group, named after the head, instead of one per member. Without the composers
nothing is fused.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from langchain.agents.middleware import AgentMiddleware

from deerflow_ext.adapters.langchain_private import chain_composers

from .hooks import WRAP_HOOK_PAIRS, WRAP_HOOKS
from .isolation import IsolatedMiddleware
from .mirror import group_head_class, group_member_class, isolated_hook, isolated_step
from .ordering import OrderingError, stack_label

__all__ = [
    "COMPOSERS",
    "FusedRun",
    "FusedWrapper",
    "GroupChains",
    "check_fused_groups",
    "fuse_runs",
    "fuse_wrap_only_runs",
    "fusible_key",
    "fusible_runs",
    "rewrapped",
]

#: LangChain's composer for each wrap hook, or ``None``: then nothing is fused or carried.
COMPOSERS: Mapping[str, Callable[[Any], Any]] | None = chain_composers()


class FusedWrapper(IsolatedMiddleware):
    """The base of a fused group's classes (``mirror.py`` generates one per inner class):
    the head's, which exposes the group's wrap hooks, and a member's, which exposes none.

    The group's state lives here, not on :class:`~.isolation.IsolatedMiddleware`: a wrapper
    made by isolation is its own layer, and only fusing (and carrying, ``carry.py``) turns
    it into one of these, in place or as a copy.
    """

    _fused_group: tuple[IsolatedMiddleware, ...] = ()  # on a head: itself, then its members
    _group_calls: GroupChains  # on a head: the composed chain per wrap hook
    _group_axes: tuple[tuple[str, str], ...] = ()  # on a head: the wrap-hook pairs it exposes

    @property
    def fused_group(self) -> tuple[IsolatedMiddleware, ...]:
        """The wrappers this one runs as one LangChain layer, itself first; empty on a member."""
        return self._fused_group


def _fusible(mw: Any) -> bool:
    if not isinstance(mw, IsolatedMiddleware) or isinstance(mw, FusedWrapper):
        return False  # not a contribution, or already a group's head or member
    hooks = mw._hooks
    return (
        bool(hooks)
        and hooks <= WRAP_HOOKS
        and not mw.tools
        and mw.state_schema is _DEFAULT_SCHEMA
        and not mw.transformers
        and mw.trace_policy is None
    )


_DEFAULT_SCHEMA: Any = AgentMiddleware.state_schema  # type: ignore[misc]


def fusible_key(mw: Any) -> tuple[type, bool]:
    """All that :func:`fusible_runs` and :func:`fuse_runs` read of one entry besides its
    placement: its class (its hooks, and its inner class for a wrapper) and whether it may
    be fused (which also reads the graph attributes the wrapper mirrored)."""
    return type(mw), _fusible(mw)


class FusedRun(NamedTuple):
    """One run of fusible wrappers as :func:`fuse_runs` makes it one layer: where it stands
    and what each member becomes. Decided from the wrappers' classes alone, so a plan for
    one shape of stack (``stack.py``) holds for every stack of that shape."""

    span: range  # the run's indices in the stack
    classes: tuple[type[FusedWrapper], ...]  # the head's group class, then each member's
    axes: tuple[tuple[str, str], ...]  # the wrap-hook pairs the group exposes
    chains: tuple[tuple[tuple[str, str], tuple[int, ...]], ...]  # per axis, the run's members on it


def fusible_runs(stack: Sequence[Any]) -> tuple[FusedRun, ...]:
    """Where ``stack`` has runs of two or more consecutive fusible wrappers in one placement,
    and how each is fused: the decision :func:`fuse_runs` carries out. None without the
    composers."""
    if COMPOSERS is None:
        return ()
    bounds: list[tuple[int, int]] = []  # each run of fusible wrappers in one placement
    for index, mw in enumerate(stack):
        if not _fusible(mw):
            continue
        if bounds and bounds[-1][1] == index and mw.placement is stack[index - 1].placement:
            bounds[-1] = (bounds[-1][0], index + 1)
        else:
            bounds.append((index, index + 1))
    return tuple(_decided(stack, range(start, stop)) for start, stop in bounds if stop - start > 1)


def _decided(stack: Sequence[IsolatedMiddleware], span: range) -> FusedRun:
    run = stack[span.start : span.stop]
    hooks = frozenset().union(*(mw.wrapped_hooks for mw in run))
    axes = tuple(pair for pair in WRAP_HOOK_PAIRS if not hooks.isdisjoint(pair))
    classes = (
        group_head_class(FusedWrapper, type(run[0].inner), axes),
        *(group_member_class(FusedWrapper, type(mw.inner)) for mw in run[1:]),
    )
    chains = tuple(
        (pair, tuple(at for at, mw in enumerate(run) if not mw.wrapped_hooks.isdisjoint(pair))) for pair in axes
    )
    return FusedRun(span, classes, axes, chains)


def fuse_runs(stack: Sequence[Any], runs: Sequence[FusedRun], *, in_place: bool = False) -> list[Any]:
    """``stack`` with each of ``runs`` (from :func:`fusible_runs` on a stack of this shape)
    handed to LangChain as one layer (see above). Order and membership are unchanged: the
    result holds a wrapper for every entry of ``stack``, at the same index.

    The wrappers of a run are new ones, and ``stack``'s own are left as they were, unless
    ``in_place``: then they are turned into the group's own, for a caller that made them and
    has shown them to no one (a copy each costs a construction ~2 µs a contribution).
    """
    result = list(stack)
    for span, classes, axes, chains in runs:
        members: list[FusedWrapper] = result[span.start : span.stop]
        if in_place:
            for mw, cls in zip(members, classes, strict=True):
                mw.__class__ = cls
        else:
            members = [rewrapped(mw, cls) for mw, cls in zip(members, classes, strict=True)]
        head = members[0]
        head._group_calls = GroupChains({pair: [members[at] for at in on_axis] for pair, on_axis in chains})
        head._fused_group = tuple(members)
        head._group_axes = axes
        result[span.start : span.stop] = members
    return result


def fuse_wrap_only_runs(stack: Sequence[Any]) -> list[Any]:
    """``stack`` with its fusible runs fused: :func:`fuse_runs` over :func:`fusible_runs`."""
    return fuse_runs(stack, fusible_runs(stack))


def check_fused_groups(stack: Sequence[Any]) -> None:
    """Raise :class:`~.ordering.OrderingError` unless each group head in ``stack`` is followed
    by its members, consecutively and in order.

    A head runs its members' wrap hooks where it stands, so the nesting LangChain sees is the
    list's only while they follow it; a stack of a shape found valid before (a member of
    another construction's group in its place, say) is checked all the same.
    """
    for index, mw in enumerate(stack):
        group = mw.fused_group if isinstance(mw, FusedWrapper) else ()
        if group and tuple(stack[index : index + len(group)]) != group:
            raise OrderingError(
                f"{stack_label(mw)} at position {index} runs a fused group of {len(group)} whose members "
                "do not follow it in order"
            )


class GroupChains:
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
            assert COMPOSERS is not None
            members = self._members[hook]
            if len(members) > 2 and not any(map(_intercepts, members)):
                # An observing member returns exactly what its handler returned (isolation.py),
                # so between such members LangChain's model-call glue has nothing to
                # normalise or collect: it only matters where the innermost member hands on
                # what the downstream call returned. Plain nesting down to that boundary,
                # LangChain's composer across it: the same results and commands, with ~10K
                # instructions less per member and model call.
                outer = _Nested(tuple(isolated_step(mw, hook) for mw in members[:-1]), hook)
                hooks = [outer, isolated_hook(members[-1], hook)]
            else:
                # Each member's own isolated hook (its per-class wrapper's), bound to it.
                hooks = [isolated_hook(mw, hook) for mw in members]
            chain = COMPOSERS[hook](hooks)
            self._chains[hook] = chain
        return chain


#: ``IsolatedMiddleware.intercepts`` read in C, for every member of a chain as it is composed.
_intercepts = operator.attrgetter("_intercept")


class _Nested:
    """Observing members' steps (:func:`~.mirror.isolated_step`) as one ``(request,
    handler)`` callable, outermost first, each handed the next as its handler: what
    LangChain's tool-call composer builds, with one :class:`_Link` per member and call
    where it makes two closures and two coroutines. Sync or async as the steps are."""

    __slots__ = ("_hook", "_steps")

    def __init__(self, steps: tuple[Callable[..., Any], ...], hook: str) -> None:
        self._steps = steps
        self._hook = hook

    def __call__(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        steps, hook = self._steps, self._hook
        for step in steps[:0:-1]:  # innermost first, down to the second
            handler = _Link(step, hook, handler)
        return steps[0](hook, request, handler)


class _Link:
    """One step with the rest of the chain as its handler, called with the request alone.

    One object per member and call, alive for the whole model call, where a
    ``functools.partial(step, handler=...)`` was a partial and its keyword dict. The
    partial, like this object, counts towards the garbage collector's next collection (the
    dict comes from a free list and does not); what the chain saves is the partial each step
    was itself."""

    __slots__ = ("_handler", "_hook", "_step")

    def __init__(self, step: Callable[..., Any], hook: str, handler: Callable[[Any], Any]) -> None:
        self._step = step
        self._hook = hook
        self._handler = handler

    def __call__(self, request: Any) -> Any:
        return self._step(self._hook, request, self._handler)


def rewrapped(mw: IsolatedMiddleware, cls: type[FusedWrapper]) -> FusedWrapper:
    """A new wrapper of ``cls`` over the same state.

    Nothing is mirrored from the extension again (a raising property would be reported
    twice), and the caller's objects are left as they were.
    """
    clone = object.__new__(cls)
    clone.__dict__.update(mw.__dict__)
    return clone
