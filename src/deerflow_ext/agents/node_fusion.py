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
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langgraph.channels.base import BaseChannel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.channels.last_value import LastValue
from langgraph.types import Command

from deerflow_ext.adapters.langgraph_private import bracket_node, bracketable, state_channels
from deerflow_ext.extensions.composition.hooks import (
    ASYNC_HOOKS,
    STATE_HOOKS,
    adopt_graph_attributes,
    implemented_hooks,
)

__all__ = ["FUSED_KINDS", "ModelBracket", "bracket_model_node", "fuse_host_node_hooks"]

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

Middleware = AgentMiddleware[Any, Any, Any]
Channel = BaseChannel[Any, Any, Any]


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
        plan = _plan(stack, host_ids)
        with _cache_lock:
            if len(_plans) >= 64:
                _plans.clear()
            _plans[shape] = plan
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
    placed: dict[int, list[tuple[type[_Fused], tuple[int, ...], str]]] = {}
    joined = ["+".join(m.name for m in run) for _, run in runs]
    for ((sync_hook, async_hook, in_order), run), name in zip(runs, joined, strict=True):
        for member in run:
            fused_away.setdefault(at[id(member)], set()).update((sync_hook, async_hook))
        executed = run if in_order else run[::-1]
        jumps = _jumps(executed, sync_hook, async_hook)
        if joined.count(name) > 1:  # the same members fuse on two chains: names stay unique
            name = f"{name}_{sync_hook}"
        node = _fused_class(sync_hook, async_hook, jumps)
        placed.setdefault(at[id(run[0])], []).append((node, tuple(at[id(m)] for m in executed), name))
    steps = tuple(
        (
            tuple(placed.get(i, ())),
            None if i not in fused_away else _view_class(type(m), frozenset(fused_away[i])),
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


_cache_lock = threading.Lock()
_UNSEEN: Any = object()
_Step = tuple[tuple[tuple[type["_Fused"], tuple[int, ...], str], ...], type["_View"] | None]
"""Per middleware of a stack: the fused nodes placed before it (class, members' positions,
name), and the view class it is given to the graph as, or ``None`` (itself)."""
_Plan = tuple[tuple[_Step, ...], tuple[tuple[int, ...], tuple[int, ...]], Mapping[str, "Channel"]]
"""Each middleware's step, the positions of the hooks the model node calls (before, after),
and every state key's channel over the stack's schemas (what the graph merges)."""
_plans: dict[tuple[Any, ...], _Plan | None] = {}


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


# -- the fused node -------------------------------------------------------------------------


class _Fused(AgentMiddleware[Any, Any, Any]):
    """One node for a run of host hooks; generated subclasses add the hook pair."""

    def __init__(self, members: tuple[Middleware, ...], channels: Mapping[str, Channel], name: str) -> None:
        super().__init__()
        self._members = members
        self._channels = channels
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def _take(self, member: Middleware, hook: str, update: Any, view: Any, updates: list[Mapping[str, Any]]) -> Any:
        """Keep ``member``'s update; the state the next member reads, or ``None`` when the
        member jumped (its jump edge would have left the run here)."""
        if not update:
            return view
        if not isinstance(update, Mapping):
            raise TypeError(f"{member.name}.{hook} returned {type(update).__name__}; a fused host hook returns a dict")
        updates.append(update)
        return None if update.get("jump_to") else self._after(view, update)

    def _after(self, view: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
        """``view`` as the next member would have read it after ``update`` was applied."""
        view = dict(view)
        for key, value in update.items():
            channel = self._channels.get(key)
            if channel is None:
                continue  # not state: the graph drops it, so the next member never sees it
            current = channel.from_checkpoint(view[key]) if key in view else channel.copy()
            current.update([value])
            view[key] = current.get()
        return view

    def _written(self, updates: list[Mapping[str, Any]]) -> Any:
        """What the members' nodes would have written: one dict, or (when a reducer key was
        written more than once) one command per member, in order, so each write is reduced."""
        if len(updates) == 1:
            return updates[0]
        last: dict[str, int] = {}
        repeated_reducer = False
        for index, update in enumerate(updates):
            for key in update:
                if key in last and isinstance(self._channels.get(key), BinaryOperatorAggregate):
                    repeated_reducer = True
                last[key] = index
        if not repeated_reducer:
            merged: dict[str, Any] = {}
            for update in updates:
                merged.update(update)  # a plain value written twice ends as the last one
            return merged
        commands: list[Command[Any]] = []
        for index, update in enumerate(updates):
            kept = {
                key: value
                for key, value in update.items()
                if last[key] == index or isinstance(self._channels.get(key), BinaryOperatorAggregate)
            }
            if kept:
                commands.append(Command(update=kept))
        return commands


def _run_sync(hook: str) -> Callable[..., Any]:
    def fused(self: _Fused, state: Any, runtime: Any) -> Any:
        view, updates = state, list[Mapping[str, Any]]()
        for member in self._members:
            view = self._take(member, hook, getattr(member, hook)(view, runtime), view, updates)
            if view is None:
                break
        return self._written(updates) if updates else None

    fused.__name__ = hook
    return fused


def _run_async(hook: str) -> Callable[..., Any]:
    async def fused(self: _Fused, state: Any, runtime: Any) -> Any:
        view, updates = state, list[Mapping[str, Any]]()
        for member in self._members:
            view = self._take(member, hook, await getattr(member, hook)(view, runtime), view, updates)
            if view is None:
                break
        return self._written(updates) if updates else None

    fused.__name__ = hook
    return fused


_class_lock = threading.Lock()
_fused_classes: dict[tuple[str, tuple[str, ...]], type[_Fused]] = {}


def _fused_class(sync_hook: str, async_hook: str, jumps: tuple[str, ...]) -> type[_Fused]:
    key = (sync_hook, jumps)
    found = _fused_classes.get(key)
    if found is not None:
        return found
    namespace: dict[str, Any] = {
        "__module__": __name__,
        sync_hook: _run_sync(sync_hook),
        async_hook: _run_async(async_hook),
    }
    if jumps:
        namespace[sync_hook].__can_jump_to__ = list(jumps)
        namespace[async_hook].__can_jump_to__ = list(jumps)
    with _class_lock:
        return _fused_classes.setdefault(key, type(f"Fused_{sync_hook}", (_Fused,), namespace))


# -- the model node's bracket -----------------------------------------------------------------


class ModelBracket(_Fused):
    """The host hooks the ``model`` node calls: ``before_model`` ones before the node's own
    work, ``after_model`` ones on the state the node leaves. A middleware with no hooks of
    its own, so ``create_agent`` makes no node of it; :func:`bracket_model_node` installs it.

    The node writes what the separate nodes would have, in their order: the ``before``
    hooks' updates, the model node's commands, the ``after`` hooks' updates. A ``before``
    hook that jumps skips the model, as its edge would have."""

    NAME = "HostModelBracket"

    def __init__(
        self, before: tuple[Middleware, ...], after: tuple[Middleware, ...], channels: Mapping[str, Channel]
    ) -> None:
        super().__init__(before, channels, self.NAME)
        self._after_members = after

    def resolve(self, runtime: Any) -> ModelBracket:
        """The bracket of the run (this one; a reused graph's slot answers with the run's)."""
        return self

    def run(self, node: Callable[[Any, Any], Any], state: Any, runtime: Any) -> Any:
        view, updates = state, list[Mapping[str, Any]]()
        for member in self._members:
            view = self._take(member, "before_model", member.before_model(view, runtime), view, updates)
            if view is None:
                return self._written(updates)
        view = self._wrote(view, node(view, runtime), updates)
        for member in self._after_members:
            view = self._take(member, "after_model", member.after_model(view, runtime), view, updates)
            if view is None:
                break
        return self._written(updates)

    async def arun(self, node: Callable[[Any, Any], Any], state: Any, runtime: Any) -> Any:
        view, updates = state, list[Mapping[str, Any]]()
        for member in self._members:
            view = self._take(member, "abefore_model", await member.abefore_model(view, runtime), view, updates)
            if view is None:
                return self._written(updates)
        view = self._wrote(view, await node(view, runtime), updates)
        for member in self._after_members:
            view = self._take(member, "aafter_model", await member.aafter_model(view, runtime), view, updates)
            if view is None:
                break
        return self._written(updates)

    def _wrote(self, view: dict[str, Any], written: Any, updates: list[Mapping[str, Any]]) -> dict[str, Any]:
        """Keep the model node's own writes (commands or dicts, in order) with the hooks'
        (one step's writes: a plain key may be written once, see ``_written``); the state
        the ``after`` hooks read (applied only when there are some: nothing else reads it)."""
        reads = bool(self._after_members)
        items = written if isinstance(written, list | tuple) else () if written is None else (written,)
        for item in items:
            if isinstance(item, Command) and (item.goto or item.graph is not None or item.resume is not None):
                raise TypeError("the model node returned a command that routes; a bracket can only keep updates")
            update = item.update if isinstance(item, Command) else item
            pairs = [update] if isinstance(update, Mapping) else [{key: value} for key, value in update or ()]
            for pair in pairs:
                updates.append(pair)
                if reads:
                    view = self._after(view, pair)
        return view


def bracket_model_node(graph: Any, middleware: Sequence[Middleware]) -> Any:
    """``graph`` (compiled by ``create_agent`` over ``middleware``) with its ``model`` node
    calling the run's :class:`ModelBracket`, when ``middleware`` holds one (itself, or a
    reused graph's slot for it: either resolves to the run's bracket)."""
    stand_in: Any = next((m for m in middleware if m.name == ModelBracket.NAME), None)
    if stand_in is None:
        return graph

    def run(node: Callable[[Any, Any], Any], state: Any, runtime: Any) -> Any:
        return stand_in.resolve(runtime).run(node, state, runtime)

    async def arun(node: Callable[[Any, Any], Any], state: Any, runtime: Any) -> Any:
        return await stand_in.resolve(runtime).arun(node, state, runtime)

    if not bracket_node(graph, "model", run, arun):
        # The plan took these hooks off their nodes: without the bracket they would never run.
        raise RuntimeError("create_agent's model node cannot be bracketed (adapters/langgraph_private.py)")
    return graph


# -- a member's view --------------------------------------------------------------------------


class _View(AgentMiddleware[Any, Any, Any]):
    """A fused run's member as the graph sees it: everything but the fused hooks, forwarded
    to the member itself (its state, name, tools and schema are the member's)."""

    def __init__(self, inner: Middleware) -> None:
        super().__init__()
        self._inner = inner
        adopt_graph_attributes(self, inner)

    @property
    def name(self) -> str:
        return self._inner.name


_view_classes: dict[tuple[type, frozenset[str]], type[_View]] = {}


def _view_class(cls: type, removed: frozenset[str]) -> type[_View]:
    key = (cls, removed)
    found = _view_classes.get(key)
    if found is not None:
        return found
    namespace: dict[str, Any] = {"__module__": __name__}
    for hook in implemented_hooks(cls) - removed:
        namespace[hook] = _forwarder(hook, getattr(cls, hook))
    with _class_lock:
        return _view_classes.setdefault(key, type(f"View{cls.__name__}", (_View,), namespace))


def _forwarder(hook: str, method: Any) -> Callable[..., Any]:
    """``hook`` on the member, with the member's own jump targets. The parameters keep
    LangChain's names: LangGraph injects ``runtime`` by name, and reuse checks them."""
    if hook in STATE_HOOKS:
        if hook in ASYNC_HOOKS:

            async def astate(self: _View, state: Any, runtime: Any) -> Any:
                return await getattr(self._inner, hook)(state, runtime)

            forward: Callable[..., Any] = astate
        else:

            def state_hook(self: _View, state: Any, runtime: Any) -> Any:
                return getattr(self._inner, hook)(state, runtime)

            forward = state_hook
    elif hook in ASYNC_HOOKS:

        async def awrap(self: _View, request: Any, handler: Callable[[Any], Any]) -> Any:
            return await getattr(self._inner, hook)(request, handler)

        forward = awrap
    else:

        def wrap(self: _View, request: Any, handler: Callable[[Any], Any]) -> Any:
            return getattr(self._inner, hook)(request, handler)

        forward = wrap
    forward.__name__ = hook
    jump = getattr(method, "__can_jump_to__", None)
    if jump is not None:
        forward.__can_jump_to__ = list(jump)  # type: ignore[attr-defined]
    return forward
