"""The single final composition point: host stack + contributed middleware -> one list.

The lead builder appends middleware after the shared base builder, so composing anywhere
earlier would place contributions against a stack that is not final. Builders therefore
call :func:`compose_middleware_stack` exactly once, last.

A contribution names a semantic ``Placement``; this module maps it to an anchor in the host
stack (docs/SPEC.md, "Runtime slice": placement, not index). Remember LangChain's reading
of the list: index 0 is the outermost wrapper.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain.agents.middleware import AgentMiddleware

from deerflow_ext.memo import Memo
from deerflow_extension_api import AgentBuildContext, Placement

from ..boundary.diagnostics import DiagnosticsList
from ..contract.snapshot import LoadedExtensions
from .isolation import IsolatedMiddleware
from .layers import LayerPlan, build_layers, layer_key, plan_layers
from .middleware_contributions import Placed, collect_middlewares
from .ordering import OrderingError, assert_ordering

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


def compose_middleware_stack(
    host: Sequence[AgentMiddleware[Any, Any, Any]],
    *,
    extensions: LoadedExtensions,
    ctx: AgentBuildContext,
    diagnostics: DiagnosticsList | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The final middleware list for one agent: ``host`` plus every contribution in scope.

    Fails open per contributor (``middleware_contributions.py``): one that raises or answers
    something other than a sequence of ``MiddlewarePlacement`` is a diagnostic and
    contributes nothing; a cancellation of the host task propagates. The result is validated
    with :func:`assert_ordering`; a contribution whose placement promise cannot hold is
    dropped with a diagnostic, while a broken *host* order raises. The valid stack is then
    handed to LangChain in fewer layers (``layers.py``); the list still holds each
    contribution, in order.
    """
    if not extensions.middlewares:
        return list(host)
    diagnostics = diagnostics if diagnostics is not None else extensions.diagnostics
    placed = collect_middlewares(extensions, ctx, diagnostics)
    shape = (
        tuple(map(type, host)),
        tuple((p.extension, p.placement, p.order, layer_key(p.middleware)) for p in placed),
    )
    plan = _plans.get(shape)
    if plan is None:
        plan = _plan(host, placed, diagnostics)
        if not plan.dropped:  # a drop is reported by every construction: it is planned anew
            _plans.put(shape, plan)
    return _build(plan, host, placed)


class _Plan(NamedTuple):
    """How one shape of contributions is composed: the result of every decision composition
    makes, none of which depends on more than the shape: the host's classes and, per
    contribution, its extension, placement and order, and what ``layers.py`` reads of it
    (:func:`~.layers.layer_key`).

    Speed: a Gateway composes the same shape for every run, and deciding again (placing,
    validating, fusing, carrying) was over half of what ten contributions cost a
    construction. The objects are still made anew each time, from this construction's
    contributions (:func:`_build`).
    """

    dropped: frozenset[str]  # extensions whose placement promise cannot hold here
    layout: tuple[int, ...]  # see _layout, over the contributions not dropped
    layers: LayerPlan  # how the valid stack is handed to LangChain (layers.py)


#: Plans by shape, bounded by the one eviction rule (``memo.py``).
_plans: Memo[tuple[Any, ...], _Plan] = Memo(limit=256)


def _plan(host: Sequence[AgentMiddleware], placed: Sequence[Placed], diagnostics: DiagnosticsList) -> _Plan:
    """Decide how ``placed`` joins ``host``, dropping (with a diagnostic) each extension
    whose placement promise the validated stack cannot keep."""
    dropped: set[str] = set()
    while True:
        kept = [p for p in placed if p.extension not in dropped]
        layout = _layout(tuple(map(type, host)), tuple((p.placement, p.order) for p in kept))
        stack = _assemble(layout, host, kept)
        try:
            assert_ordering(stack)
        except OrderingError as exc:
            if exc.extension is None or exc.extension in dropped:
                raise
            diagnostics.record(exc.extension, _PHASE, f"middleware dropped from this agent: {exc}", exc=exc)
            dropped.add(exc.extension)
            continue
        return _Plan(frozenset(dropped), layout, plan_layers(stack))


def _build(plan: _Plan, host: Sequence[AgentMiddleware], placed: Sequence[Placed]) -> list[AgentMiddleware]:
    """The stack ``plan`` describes, made of this construction's objects."""
    kept = [p for p in placed if p.extension not in plan.dropped] if plan.dropped else placed
    # The wrappers are this construction's own (collect_middlewares made them).
    return build_layers(_assemble(plan.layout, host, kept), plan.layers)


def host_layers(stack: Sequence[AgentMiddleware[Any, Any, Any]]) -> list[AgentMiddleware[Any, Any, Any]]:
    """The host's middlewares as they stand in a composed ``stack``: every entry that is not
    a contribution (each contribution is an :class:`IsolatedMiddleware`).

    Not the ``host`` list the stack was composed from: a host layer that carries a fused
    group is a copy of itself (``carry.py``), with the host's own node hooks.
    """
    return [m for m in stack if not isinstance(m, IsolatedMiddleware)]


def _assemble(
    layout: Sequence[int], host: Sequence[AgentMiddleware], placed: Sequence[Placed]
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
