"""The nodes :mod:`.node_fusion` compiles in place of host hooks: a fused run of them, the
``model`` node's bracket, and the view each member is given to the graph as.

The classes are generated, one per hook pair and jump targets (a fused node) or per member
class and removed hooks (a view), and kept: every construction of an agent of one shape
uses the same ones. :mod:`.node_fusion` decides what fuses where; this module only makes
what it decided run as the separate nodes would have (same order, same reducers, same
jumps).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.channels.base import BaseChannel
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.types import Command

from deerflow_ext.adapters.langgraph_private import bracket_node
from deerflow_ext.extensions.composition.hook_classes import StandIn, hook_class, hook_method, jump_targets
from deerflow_ext.extensions.composition.hooks import implemented_hooks
from deerflow_ext.memo import ClassKeyMemo

__all__ = ["FusedNode", "MemberView", "ModelBracket", "bracket_model_node", "fused_class", "view_class"]

Middleware = AgentMiddleware[Any, Any, Any]
Channel = BaseChannel[Any, Any, Any]


class FusedNode(StandIn):
    """One node for a run of host hooks; generated subclasses add the hook pair."""

    def __init__(self, members: tuple[Middleware, ...], channels: Mapping[str, Channel], name: str) -> None:
        super().__init__(name)
        self._members = members
        self._channels = channels

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


def _fuse(node: FusedNode, hook: str, state: Any, runtime: Any) -> Any:
    """A fused node's sync hook: each member's ``hook`` in order, on the state it would read."""
    view, updates = state, list[Mapping[str, Any]]()
    for member in node._members:
        view = node._take(member, hook, getattr(member, hook)(view, runtime), view, updates)
        if view is None:
            break
    return node._written(updates) if updates else None


async def _afuse(node: FusedNode, hook: str, state: Any, runtime: Any) -> Any:
    """A fused node's async hook: :func:`_fuse`, each member's hook awaited."""
    view, updates = state, list[Mapping[str, Any]]()
    for member in node._members:
        view = node._take(member, hook, await getattr(member, hook)(view, runtime), view, updates)
        if view is None:
            break
    return node._written(updates) if updates else None


def _build_fused_class(base: type, key: tuple[str, str, tuple[str, ...]]) -> type[FusedNode]:
    sync_hook, async_hook, jumps = key
    methods = {sync_hook: hook_method(sync_hook, _fuse), async_hook: hook_method(async_hook, _afuse)}
    targets = dict.fromkeys(methods, jumps) if jumps else None
    return hook_class(FusedNode, f"Fused_{sync_hook}", methods, jumps=targets)


#: The fused-node classes, by hook pair and jump targets (the base only anchors the table).
_fused_classes: ClassKeyMemo[tuple[str, str, tuple[str, ...]], type[FusedNode]] = ClassKeyMemo(_build_fused_class)


def fused_class(sync_hook: str, async_hook: str, jumps: tuple[str, ...]) -> type[FusedNode]:
    """The node class for a fused run of ``sync_hook``/``async_hook`` that may jump to ``jumps``."""
    return _fused_classes(FusedNode, (sync_hook, async_hook, jumps))


# -- the model node's bracket -----------------------------------------------------------------


class ModelBracket(FusedNode):
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


class MemberView(StandIn):
    """A fused run's member as the graph sees it: everything but the fused hooks, forwarded
    to the member itself (its state, name, tools and schema are the member's)."""

    def __init__(self, inner: Middleware) -> None:
        super().__init__(inner.name, like=inner)
        self._inner = inner


def _build_view_class(cls: type, removed: frozenset[str]) -> type[MemberView]:
    hooks = implemented_hooks(cls) - removed
    methods = {hook: hook_method(hook, _forward) for hook in hooks}
    return hook_class(MemberView, f"View{cls.__name__}", methods, jumps=jump_targets(cls, hooks))


#: A member's view classes, by member class, then by the hooks the view leaves out.
_view_classes: ClassKeyMemo[frozenset[str], type[MemberView]] = ClassKeyMemo(_build_view_class)


def view_class(cls: type, removed: frozenset[str]) -> type[MemberView]:
    """The view of a ``cls`` member whose ``removed`` hooks a fused node runs instead."""
    return _view_classes(cls, removed)


def _forward(view: MemberView, hook: str, first: Any, second: Any) -> Any:
    """A view's hook: the member's own (``hook_classes`` keeps LangChain's parameter names:
    LangGraph injects ``runtime`` by name, and reuse checks them)."""
    return getattr(view._inner, hook)(first, second)
