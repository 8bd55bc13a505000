"""The host's own node hooks, fused: one graph step per run of them instead of one each.

Why: ``create_agent`` makes every ``before_agent`` / ``before_model`` / ``after_model`` /
``after_agent`` hook a graph node of its own, and every node is a superstep (a checkpoint,
a ``values`` event, LangGraph's task bookkeeping). The host stack alone holds nine such
hooks, so a trivial run was twelve supersteps, and they were most of its cost
(~12 ms in-process with them, ~4 ms with none). The hooks themselves are cheap.

What is fused: for each hook kind, a *run* of host middlewares (built by
``build_host_stack``, never an extension's) that are next to each other among the stack's
middlewares with that kind of hook. Extension hooks are never fused, and they split runs,
so an extension placed between two host middlewares still runs between them, as its own
node. A fused node calls its members in the order their nodes would have run, applies
each member's update to the state the next one sees through the graph's own channels (the
same reducers, e.g. ``add_messages``), stops at a member that jumps (as the jump edge
would), and writes what the separate nodes would have written. Host hooks never
interrupt, so re-running a fused node on resume re-runs nothing that had finished.

The model's own step takes two runs more (:class:`ModelBracket`): the host's
``before_model`` hooks that run last before the model and its ``after_model`` hooks that
run first after it are called inside the ``model`` node, before and after the node's own
work, when nothing could tell the difference from the graph's edges (see
:func:`_bracketed`). A trivial lead run is then four graph steps instead of six
(each step is ~0.3 ms of a ~3 ms in-process run). A failed model call now also drops what
the ``before_model`` hooks wrote in the same step, and a resumed ``model`` node calls them
again; host hooks neither interrupt nor hold anything a second call would repeat wrongly.

Only the compiled graph changes: the stack, its order, the descriptor and the placement
anchors are the composed stack's (``agents/lead.py`` describes that, not this). What a
client can see is the node names in ``updates`` events: one update named after the run
(``ThreadDataMiddleware+SandboxLeaseMiddleware.before_agent``) instead of one per member,
and the bracketed hooks' writes in the ``model`` node's update.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.channels.last_value import LastValue

from deerflow_ext.adapters.langgraph_private import bracketable, state_channels
from deerflow_ext.extensions.composition.hooks import implemented_hooks
from deerflow_ext.memo import Memo

from .fused_nodes import Channel, FusedNode, MemberView, Middleware, ModelBracket, fused_class, view_class

__all__ = ["FUSED_KINDS", "fuse_host_node_hooks"]

#: Each node-hook kind as (sync, async) hook names, and whether it runs in stack order.
FUSED_KINDS: tuple[tuple[str, str, bool], ...] = (
    ("before_agent", "abefore_agent", True),
    ("before_model", "abefore_model", True),
    ("after_model", "aafter_model", False),  # after_* hooks run from the stack's end
    ("after_agent", "aafter_agent", False),
)
_BEFORE_MODEL, _AFTER_MODEL = FUSED_KINDS[1], FUSED_KINDS[2]
#: The channels whose semantics a fused node reproduces (all create_agent's state uses).
_KNOWN_CHANNELS = (LastValue, BinaryOperatorAggregate, EphemeralValue)


def fuse_host_node_hooks(stack: Sequence[Middleware], host: Sequence[Middleware]) -> list[Middleware]:
    """The middleware list to compile for ``stack``: ``stack`` itself when nothing fuses,
    else each fused run of ``host`` middlewares' hooks as one node, and the hooks the
    ``model`` node calls as a :class:`ModelBracket` at the end (compile the list, then
    hand the graph to :func:`bracket_model_node`).

    A member of a run is given to the graph as a view that keeps all its other hooks,
    tools, state schema and name; the run's node is a middleware of its own, placed just
    before the run's first member.

    Every construction of an agent asks this for its own stack (1.3% of a served
    run's CPU), and stacks of one shape fuse alike: what fuses where is worked out once per
    shape (:func:`_plan`), and each call only wraps its own middlewares."""
    host_ids = {id(m) for m in host}
    # (A list, then a tuple: cheaper than a generator, for every middleware of every construction.)
    shape = tuple([(type(m), id(m) in host_ids, m.trace_policy is None, m.name, m.state_schema) for m in stack])
    plan = _plans.get(shape, _UNSEEN)
    if plan is _UNSEEN:
        plan = _plans.put(shape, _plan(stack, host_ids))
    if plan is None:
        return list(stack)
    steps, (before, after), channels = plan
    result: list[Middleware] = []
    for middleware, (nodes, view) in zip(stack, steps, strict=True):
        for node, members, name in nodes:
            result.append(node(tuple([stack[at] for at in members]), channels, name))
        result.append(middleware if view is None else view(middleware))
    if before or after:
        result.append(ModelBracket(tuple(stack[at] for at in before), tuple(stack[at] for at in after), channels))
    return result


def _plan(stack: Sequence[Middleware], host_ids: set[int]) -> _Plan | None:
    """What fuses in ``stack`` (by position), or ``None`` when nothing does (or a state
    key's channel is unknown here: see :func:`_merged`)."""
    channels = _merged(tuple(dict.fromkeys(m.state_schema for m in stack)))
    if channels is None:
        return None
    hooks = [implemented_hooks(type(m)) for m in stack]
    before, after = _bracketed(stack, hooks, host_ids) if _model_node_bracketable() else ((), ())
    bracketed = {_BEFORE_MODEL: set(before), _AFTER_MODEL: set(after)}
    runs = [
        (kind, run) for kind in FUSED_KINDS for run in _runs(stack, hooks, kind, host_ids, bracketed.get(kind, set()))
    ]
    if not runs and not before and not after:
        return None
    at = {id(m): i for i, m in enumerate(stack)}
    fused_away: dict[int, set[str]] = {}
    for (sync_hook, async_hook, _), positions in ((_BEFORE_MODEL, before), (_AFTER_MODEL, after)):
        for position in positions:
            fused_away.setdefault(position, set()).update((sync_hook, async_hook))
    placed: dict[int, list[tuple[type[FusedNode], tuple[int, ...], str]]] = {}
    joined = ["+".join(m.name for m in run) for _, run in runs]
    for ((sync_hook, async_hook, in_order), run), name in zip(runs, joined, strict=True):
        for member in run:
            fused_away.setdefault(at[id(member)], set()).update((sync_hook, async_hook))
        executed = run if in_order else run[::-1]
        jumps = _jumps(executed, sync_hook, async_hook)
        if joined.count(name) > 1:  # the same members fuse on two chains: names stay unique
            name = f"{name}_{sync_hook}"
        node = fused_class(sync_hook, async_hook, jumps)
        placed.setdefault(at[id(run[0])], []).append((node, tuple(at[id(m)] for m in executed), name))
    steps = tuple(
        (
            tuple(placed.get(i, ())),
            None if i not in fused_away else view_class(type(m), frozenset(fused_away[i])),
        )
        for i, m in enumerate(stack)
    )
    return steps, (before, after), channels


@functools.cache
def _model_node_bracketable() -> bool:
    """Whether ``create_agent``'s model node is one :func:`bracket_model_node` can take:
    asked once, of a small agent, so that a LangChain or LangGraph that changed it gets
    separate nodes (slower, not broken). ``test_private_surface.py`` makes that loud."""
    return bracketable(create_agent(GenericFakeChatModel(messages=iter(())), []), "model")


def _fusible(middleware: Middleware, found: frozenset[str], kind: tuple[str, str, bool], host_ids: set[int]) -> bool:
    """A host middleware (never an extension's, never a traced one) with both of ``kind``'s hooks."""
    return id(middleware) in host_ids and {kind[0], kind[1]} <= found and middleware.trace_policy is None


def _bracketed(
    stack: Sequence[Middleware], hooks: Sequence[frozenset[str]], host_ids: set[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The positions whose ``before_model`` / ``after_model`` hooks the ``model`` node
    calls, each in the order they run, when the graph could not tell.

    ``before``: the fusible host hooks that run last before the model (a tail of the chain,
    so no other hook ran between them and the model). ``after``: the whole ``after_model``
    chain, when every hook on it is fusible. Only a jump to ``"end"`` is allowed: with no
    ``after_model`` node left, the edge out of ``model`` reads ``jump_to`` and takes
    ``"end"`` where the hook's own edge would have; a ``before`` jump needs that too, so
    ``before`` hooks that may jump are only taken with the whole ``after`` chain."""

    def chain(kind: tuple[str, str, bool]) -> list[int]:
        return [i for i, found in enumerate(hooks) if kind[0] in found or kind[1] in found]

    def takes(i: int, kind: tuple[str, str, bool]) -> bool:
        jumps = _jumps((stack[i],), kind[0], kind[1])
        return _fusible(stack[i], hooks[i], kind, host_ids) and set(jumps) <= {"end"}

    after_chain = chain(_AFTER_MODEL)
    after = tuple(reversed(after_chain)) if all(takes(i, _AFTER_MODEL) for i in after_chain) else ()
    before: list[int] = []
    for i in reversed(chain(_BEFORE_MODEL)):
        if not takes(i, _BEFORE_MODEL):
            break
        before.insert(0, i)
    if len(after) < len(after_chain) and any(_jumps((stack[i],), *_BEFORE_MODEL[:2]) for i in before):
        before = []
    return tuple(before), after


def _runs(
    stack: Sequence[Middleware],
    hooks: Sequence[frozenset[str]],
    kind: tuple[str, str, bool],
    host_ids: set[int],
    bracketed: set[int],
) -> list[list[Middleware]]:
    """Maximal runs (two or more) of fusible host middlewares among those with ``kind``
    (the ``bracketed`` positions are the model node's: they are not on the chain)."""
    sync_hook, async_hook, _ = kind
    runs: list[list[Middleware]] = []
    current: list[Middleware] = []
    for i, (middleware, found) in enumerate(zip(stack, hooks, strict=True)):
        if (sync_hook not in found and async_hook not in found) or i in bracketed:
            continue  # not on this chain: it neither joins nor splits a run
        if _fusible(middleware, found, kind, host_ids):
            current.append(middleware)
            continue
        if len(current) > 1:
            runs.append(current)
        current = []
    if len(current) > 1:
        runs.append(current)
    return runs


def _jumps(members: Sequence[Middleware], sync_hook: str, async_hook: str) -> tuple[str, ...]:
    """Where any member may jump: the fused node's edge offers them all."""
    found: list[str] = []
    for member in members:
        for hook in (sync_hook, async_hook):
            for target in getattr(getattr(type(member), hook), "__can_jump_to__", ()) or ():
                if target not in found:
                    found.append(target)
    return tuple(found)


_UNSEEN: Any = object()
_Step = tuple[tuple[tuple[type["FusedNode"], tuple[int, ...], str], ...], type["MemberView"] | None]
"""Per middleware of a stack: the fused nodes placed before it (class, members' positions,
name), and the view class it is given to the graph as, or ``None`` (itself)."""
_Plan = tuple[tuple[_Step, ...], tuple[tuple[int, ...], tuple[int, ...]], Mapping[str, "Channel"]]
"""Each middleware's step, the positions of the hooks the model node calls (before, after),
and every state key's channel over the stack's schemas (what the graph merges)."""
#: What fuses where, by stack shape (``memo.py``: two constructions racing on a new shape
#: each work out an equal plan; either is kept).
_plans: Memo[tuple[Any, ...], _Plan | None] = Memo(limit=64)


def _merged(schemas: Sequence[type]) -> dict[str, Channel] | None:
    """One channel per key; ``None`` when a schema's channels cannot be read here, or one
    is of a kind a fused node does not reproduce, or two schemas give a key different ones."""
    merged: dict[str, Channel] = {}
    for schema in schemas:
        found = state_channels(schema)
        if found is None:
            return None
        for key, channel in found.items():
            if not isinstance(channel, _KNOWN_CHANNELS) or not _agrees(merged.setdefault(key, channel), channel):
                return None
    return merged


def _agrees(a: Channel, b: Channel) -> bool:
    if type(a) is not type(b):
        return False
    return not isinstance(a, BinaryOperatorAggregate) or a.operator == b.operator  # type: ignore[attr-defined]
