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
separate layers; the other members stay in the stack in their place (attribution,
descriptor, ordering, node names) but expose no hook, so LangChain builds nothing for them.
Every member is still isolated and attributed separately. What changes: LangSmith records
one span per group, named after the head, instead of one per member. Without the composers
nothing is fused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from deerflow_ext.adapters.langchain_private import chain_composers

from .hooks import WRAP_HOOK_PAIRS, WRAP_HOOKS
from .isolation import IsolatedMiddleware
from .mirror import group_head_class, group_member_class, isolated_hook, plain_class

__all__ = ["COMPOSERS", "GroupChains", "fuse_wrap_only_runs", "rewrapped"]

#: LangChain's composer for each wrap hook, or ``None``: then nothing is fused or carried.
COMPOSERS: Mapping[str, Callable[[Any], Any]] | None = chain_composers()


def _fusible(mw: Any) -> bool:
    return (
        isinstance(mw, IsolatedMiddleware)
        and not mw.fused_group
        and type(mw) is plain_class(type(mw.inner))  # a plain per-class wrapper, not a member
        and bool(mw.wrapped_hooks)
        and mw.wrapped_hooks <= WRAP_HOOKS
        and not mw.tools
        and mw.state_schema is AgentMiddleware.state_schema  # type: ignore[misc]
        and not mw.transformers
        and mw.trace_policy is None
    )


def fuse_wrap_only_runs(stack: Sequence[Any]) -> list[Any]:
    """``stack`` with each run of two or more consecutive fusible wrappers in one placement
    handed to LangChain as one layer (see above). Order and membership are unchanged: the
    result holds a wrapper for every entry of ``stack``, at the same index."""
    if COMPOSERS is None:
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
    head_inner = type(run[0].inner)
    hooks = frozenset().union(*(mw.wrapped_hooks for mw in run))
    axes = tuple(pair for pair in WRAP_HOOK_PAIRS if hooks & set(pair))
    head = rewrapped(run[0], group_head_class(IsolatedMiddleware, head_inner, axes))
    members = [head, *(rewrapped(mw, group_member_class(IsolatedMiddleware, type(mw.inner))) for mw in run[1:])]
    head._group_calls = GroupChains({pair: [mw for mw in members if mw.wrapped_hooks & set(pair)] for pair in axes})
    head._fused_group = tuple(members)
    head._group_axes = axes
    return members


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
            # Each member's own isolated hook (its per-class wrapper's), bound to it.
            chain = COMPOSERS[hook]([isolated_hook(mw, hook) for mw in self._members[hook]])
            self._chains[hook] = chain
        return chain


def rewrapped(mw: IsolatedMiddleware, cls: type[IsolatedMiddleware]) -> IsolatedMiddleware:
    """A new wrapper of ``cls`` over the same state.

    Nothing is mirrored from the extension again (a raising property would be reported
    twice), and the caller's objects are left as they were.
    """
    clone = object.__new__(cls)
    clone.__dict__.update(mw.__dict__)
    return clone
