"""The single final composition point: host stack + contributed middleware -> one list.

The lead builder appends middleware after the shared base builder, so composing anywhere
earlier would place contributions against a stack that is not final. Builders therefore
call :func:`compose_middleware_stack` exactly once, last.

A contribution names a semantic ``Placement``; this module maps it to an anchor in the host
stack. Remember LangChain's reading of the list: index 0 is the outermost wrapper.

==================  ==========================================  ============================
placement           where                                       why
==================  ==========================================  ============================
``TOOL_VISIBLE``    just before the retry layer, first          outermost on the tool axis
``MODEL_LOGICAL``   just before the retry layer                 sees one logical model call
``STANDARD``        just before ``ClarificationMiddleware``     the extension slot
``MODEL_PHYSICAL``  after ``STANDARD``                          inside every request transform
``TOOL_RAW``        last before ``ClarificationMiddleware``     next to the tool callable
==================  ==========================================  ============================

``ClarificationMiddleware`` stays last: it only ends a turn on its own tool call and wraps
neither axis, so ``TOOL_RAW`` is still adjacent to every real tool execution. Inside one
placement, contributions are ordered by ``order``, then registration. When an anchor class is
absent (subagent stacks omit some), the group goes before the next host class that *is*
present in documented order, or at the end.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import AgentBuildContext, AgentScope, MiddlewarePlacement, Placement

from .carry import Carry, carry_groups, carry_plan
from .diagnostics import DiagnosticsList
from .exits import EXTENSION_FAILURES
from .fusion import FusedRun, check_fused_groups, fuse_runs, fusible_key, fusible_runs
from .hooks import node_slug
from .isolation import IsolatedMiddleware, isolate
from .loopwatch import RunningHook, register_site
from .memo import Memo
from .metrics import call_stats, count_call
from .ordering import OrderingError, assert_ordering
from .origin import is_host_cancellation
from .snapshot import LoadedExtensions

__all__ = ["compose_middleware_stack", "host_layers"]

_PHASE = "middleware"


@dataclass(frozen=True)
class _Anchor:
    """Insert before ``before`` (or the next present host class); ``rank`` orders groups."""

    before: type
    rank: int


@functools.cache
def _anchors() -> Mapping[Placement, _Anchor]:
    # Resolved on first use — composition time, inside the middleware builder — because
    # the middleware layer imports this package (see ordering.py for the cycle it avoids).
    from deerflow_ext.agents.middlewares import ClarificationMiddleware, LLMErrorHandlingMiddleware

    return {
        Placement.TOOL_VISIBLE: _Anchor(LLMErrorHandlingMiddleware, 0),
        Placement.MODEL_LOGICAL: _Anchor(LLMErrorHandlingMiddleware, 1),
        Placement.STANDARD: _Anchor(ClarificationMiddleware, 0),
        Placement.MODEL_PHYSICAL: _Anchor(ClarificationMiddleware, 1),
        Placement.TOOL_RAW: _Anchor(ClarificationMiddleware, 2),
    }


@functools.cache
def _host_rank() -> Mapping[type, int]:
    from deerflow_ext.agents.middlewares import HOST_STACK_ORDER

    return {cls: rank for rank, cls in enumerate(HOST_STACK_ORDER)}


class _Placed(NamedTuple):
    """A contribution as wrapped; its registration order is its index in ``_collect``'s list."""

    extension: str
    middleware: IsolatedMiddleware
    placement: Placement
    order: int


def compose_middleware_stack(
    host: Sequence[AgentMiddleware[Any, Any, Any]],
    *,
    extensions: LoadedExtensions,
    ctx: AgentBuildContext,
    diagnostics: DiagnosticsList | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The final middleware list for one agent: ``host`` plus every contribution in scope.

    Fails open per contributor: one that raises (its own ``CancelledError`` included) or
    returns something other than a sequence of ``MiddlewarePlacement`` is recorded as a
    diagnostic and contributes nothing; a cancellation of the host task propagates. The
    result is validated with :func:`assert_ordering`; a contribution whose placement promise
    cannot hold is dropped with a diagnostic, while a broken *host* order raises. Consecutive
    wrap-only contributions in one placement run as one LangChain layer
    (:func:`~.fusion.fuse_wrap_only_runs`); the list still holds each of them, in order.
    """
    if not extensions.middlewares:
        return list(host)
    diagnostics = diagnostics if diagnostics is not None else extensions.diagnostics
    placed, keys = _collect(extensions, ctx, diagnostics)
    shape = (tuple(map(type, host)), tuple(keys))
    plan = _plans.get(shape)
    if plan is None:
        plan = _plan(host, placed, diagnostics)
        if not plan.dropped:  # a drop is reported by every construction: it is planned anew
            _plans.put(shape, plan)
    return _build(plan, host, placed)


class _Plan(NamedTuple):
    """How one shape of contributions is composed: the result of every decision composition
    makes, none of which depends on more than the shape: the host's classes and, per
    contribution, its extension, placement and order, and what fusing reads of it
    (:func:`~.fusion.fusible_key`), as :func:`_collect` lists them.

    Speed: a Gateway composes the same shape for every run, and deciding again (placing,
    fusing, validating, carrying) was over half of what ten contributions cost a
    construction. The objects are still made anew each time, from this construction's
    contributions (:func:`_build`).
    """

    dropped: frozenset[str]  # extensions whose placement promise cannot hold here
    layout: tuple[int, ...]  # see _layout, over the contributions not dropped
    runs: tuple[FusedRun, ...]  # fusion.fusible_runs of the assembled stack
    carries: tuple[Carry, ...]  # carry.carry_plan of the fused stack


#: Plans by shape, bounded by the one eviction rule (``memo.py``).
_plans: Memo[tuple[Any, ...], _Plan] = Memo(limit=256)


def _plan(host: Sequence[AgentMiddleware], placed: Sequence[_Placed], diagnostics: DiagnosticsList) -> _Plan:
    """Decide how ``placed`` joins ``host``, dropping (with a diagnostic) each extension
    whose placement promise the validated stack cannot keep."""
    dropped: set[str] = set()
    while True:
        kept = [p for p in placed if p.extension not in dropped]
        layout = _layout(tuple(map(type, host)), tuple((p.placement, p.order) for p in kept))
        assembled = _assemble(layout, host, kept)
        # Runs of wrap-only contributions become one LangChain layer each (fusion.py):
        # same entries, same order, every one still isolated and attributed on its own.
        runs = fusible_runs(assembled)
        stack = fuse_runs(assembled, runs)
        try:
            assert_ordering(stack)
            check_fused_groups(stack)
        except OrderingError as exc:
            if exc.extension is None or exc.extension in dropped:
                raise
            diagnostics.record(exc.extension, _PHASE, f"middleware dropped from this agent: {exc}", exc=exc)
            dropped.add(exc.extension)
            continue
        # Each group then runs inside the host wrap layer just before it, where there is one
        # (carry.py): the same nesting, one LangChain layer fewer per construction.
        return _Plan(frozenset(dropped), layout, runs, carry_plan(stack))


def _build(plan: _Plan, host: Sequence[AgentMiddleware], placed: Sequence[_Placed]) -> list[AgentMiddleware]:
    """The stack ``plan`` describes, made of this construction's objects."""
    kept = [p for p in placed if p.extension not in plan.dropped] if plan.dropped else placed
    # The wrappers are this construction's own (_collect made them): fused where they stand.
    fused = fuse_runs(_assemble(plan.layout, host, kept), plan.runs, in_place=True)
    return carry_groups(fused, plan.carries)


def host_layers(stack: Sequence[AgentMiddleware[Any, Any, Any]]) -> list[AgentMiddleware[Any, Any, Any]]:
    """The host's middlewares as they stand in a composed ``stack``: every entry that is not
    a contribution (each contribution is an :class:`IsolatedMiddleware`).

    Not the ``host`` list the stack was composed from: a host layer that carries a fused
    group is a copy of itself (``carry.py``), with the host's own node hooks.
    """
    return [m for m in stack if not isinstance(m, IsolatedMiddleware)]


def _collect(
    extensions: LoadedExtensions, ctx: AgentBuildContext, diagnostics: DiagnosticsList
) -> tuple[list[_Placed], list[tuple[Any, ...]]]:
    """Every contribution in scope, wrapped, and each one's part of the shape (see _Plan)."""
    placed: list[_Placed] = []
    keys: list[tuple[Any, ...]] = []
    counts: dict[tuple[str, str], int] = {}
    # ``ctx.scope in item.scope`` as the flag type answers it, on the members' int values:
    # the flag's own ``in`` (and any cache of it, which hashes both members) is Python code,
    # asked for every contribution of every construction.
    wanted = ctx.scope._value_
    for contribution in extensions.middlewares:
        extension = contribution.extension
        stats = call_stats(extension, "contribute_middlewares")
        started = time.perf_counter()
        try:
            placements = _validated(contribution.contributor.contribute_middlewares(extensions.app_store, ctx))
        except EXTENSION_FAILURES as exc:
            # The contributor's own CancelledError (an internal timeout, say) is a failure
            # like any other; only a cancellation of the host task propagates (origin.py).
            # Its KeyboardInterrupt/SystemExit too: it cannot stop the Gateway (exits.py).
            count_call(stats, started, exc)
            if is_host_cancellation(exc):
                raise
            diagnostics.record(
                extension,
                _PHASE,
                f"contribute_middlewares raised {type(exc).__name__}: {exc}; contributes nothing here",
                exc=exc,
            )
            continue
        count_call(stats, started)
        for item in placements:
            if item.scope._value_ & wanted != wanted:
                continue
            key = (node_slug(extension), node_slug(type(item.middleware).__name__))
            counts[key] = counts.get(key, 0) + 1
            wrapped = isolate(  # validated above: the checks of IsolatedMiddleware() are done
                item.middleware,
                extension=extension,
                index=counts[key],
                diagnostics=diagnostics,
                placement=item.placement,
                intercept=contribution.intercept,
            )
            placed.append(_Placed(extension, wrapped, item.placement, item.order))
            keys.append((extension, item.placement, item.order, fusible_key(wrapped)))
    return placed, keys


def _running_contributor(frame: Any) -> RunningHook | None:
    contribution = frame.f_locals.get("contribution")
    return None if contribution is None else RunningHook(contribution.extension, "contribute_middlewares")


register_site(_collect, _running_contributor)


def _validated(result: Any) -> Sequence[MiddlewarePlacement]:
    """The contributor's answer, or ``TypeError`` naming what is wrong with it.

    All or nothing: half of an extension's middleware set can be worse than none of it.
    What is checked is a copy (a tuple is its own): wrapping runs extension code (a property
    may be read), which must not change the items after they were checked.
    """
    if result is None:
        return ()
    # A list or tuple, what nearly every contributor returns, skips the two ABC checks.
    if type(result) not in (list, tuple) and (
        isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable)
    ):
        raise TypeError(f"returned {type(result).__name__}, not a sequence of MiddlewarePlacement")
    items = result if type(result) is tuple else list(result)
    # Only a contribution of two or more can hold one instance twice.
    seen: set[int] | None = set() if len(items) > 1 else None
    for item in items:
        if not isinstance(item, MiddlewarePlacement):
            raise TypeError(f"returned a {type(item).__name__} item, not a MiddlewarePlacement")
        placement, scope, order, middleware = item.placement, item.scope, item.order, item.middleware
        # (The exact types first: what nearly every contribution holds, and each a cheaper check.)
        if (type(placement) is not Placement and not isinstance(placement, Placement)) or (
            type(scope) is not AgentScope and not isinstance(scope, AgentScope)
        ):
            raise TypeError(f"placement {placement!r} / scope {scope!r} is not a Placement / AgentScope")
        if type(order) is not int and (not isinstance(order, int) or isinstance(order, bool)):
            raise TypeError(f"order {order!r} is not an int")
        if not isinstance(middleware, AgentMiddleware) or isinstance(middleware, IsolatedMiddleware):
            raise TypeError(f"{type(middleware).__name__} is not an AgentMiddleware")
        if seen is not None:
            if id(middleware) in seen:
                raise TypeError(f"the same {type(middleware).__name__} instance is contributed twice")
            seen.add(id(middleware))
    return items


def _assemble(
    layout: Sequence[int], host: Sequence[AgentMiddleware], placed: Sequence[_Placed]
) -> list[AgentMiddleware]:
    count = len(host)
    return [host[i] if i < count else placed[i - count].middleware for i in layout]


def _layout(host: tuple[type, ...], placed: tuple[tuple[Placement, int], ...]) -> tuple[int, ...]:
    """Where each entry goes: the composed stack as indices, ``i`` for ``host[i]`` and
    ``len(host) + j`` for the ``j``-th contribution.

    A function of the host's classes and each contribution's placement and ``order`` (its
    registration is its position).
    """
    anchors, rank = _anchors(), _host_rank()
    # Each host middleware's documented rank, once per layout (not once per contribution).
    host_ranks = [next((r for cls, r in rank.items() if issubclass(mw, cls)), None) for mw in host]
    index_of: dict[type, int] = {}
    slots: dict[int, list[int]] = {}
    for sequence, (placement, _) in enumerate(placed):
        anchor = anchors[placement].before
        if anchor not in index_of:
            index_of[anchor] = _insertion_index(host_ranks, rank[anchor])
        slots.setdefault(index_of[anchor], []).append(sequence)
    layout: list[int] = []
    for index in range(len(host) + 1):
        group = sorted(slots.get(index, ()), key=lambda j: (anchors[placed[j][0]].rank, placed[j][1], j))
        layout.extend(len(host) + j for j in group)
        if index < len(host):
            layout.append(index)
    return tuple(layout)


def _insertion_index(host_ranks: Sequence[int | None], wanted: int) -> int:
    """Index of the first host middleware at or after rank ``wanted`` in documented order."""
    for index, mw_rank in enumerate(host_ranks):
        if mw_rank is not None and mw_rank >= wanted:
            return index
    return len(host_ranks)
