"""LangGraph's private state-schema reader (``langgraph.graph.state._get_channels``) and
node runnable (``langgraph._internal._runnable.RunnableCallable``).

Used by node-hook fusion (``agents/node_fusion.py``, ``agents/fused_nodes.py``): a fused node runs several middleware
hooks in one graph step, so between two of them it must apply the first one's update the
way the graph would have, through each state key's channel (a reducer such as
``add_messages``, or a plain last value). ``StateGraph`` derives those channels from the
state schema with ``_get_channels(schema) -> (channels, managed, type_hints)``; this is the
one place that calls it.

Fallback: without it (or when it stops answering in that shape) nothing is fused: every
hook stays its own graph node, which only costs speed.

Node fusion also calls hooks inside ``create_agent``'s ``model`` node (``ModelBracket``):
the compiled graph's node is replaced by one that calls the bracket with the node's own
function. ``create_agent`` makes that node a ``RunnableCallable(model_node, amodel_node)``
whose functions take ``(state, runtime)``; the replacement is a ``RunnableCallable`` too,
so LangGraph injects ``runtime`` into it as it did into the original. When the node is
not that (:func:`bracketable`; node fusion asks once, of a small agent), nothing is
bracketed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langgraph.channels.base import BaseChannel

_RunnableCallable: Any
try:
    from langgraph._internal._runnable import RunnableCallable as _RunnableCallable
except ImportError:  # another LangGraph: nothing is bracketed
    _RunnableCallable = None

__all__ = ["bracket_node", "bracketable", "state_channels"]


def state_channels(schema: type) -> Mapping[str, BaseChannel[Any, Any, Any]] | None:
    """The channel ``StateGraph`` would build for each key of ``schema``, or ``None`` when
    this LangGraph lacks the helper or it answers in another shape."""
    try:
        from langgraph.graph.state import _get_channels
    except ImportError:
        return None
    try:
        found = _get_channels(schema)
    except Exception:  # a schema LangGraph itself would refuse: leave it to the graph
        return None
    if not isinstance(found, tuple) or not found or not isinstance(found[0], dict):
        return None
    channels: dict[str, Any] = found[0]
    if not all(isinstance(channel, BaseChannel) for channel in channels.values()):
        return None
    return channels


Node = Callable[[Any, Any], Any]


def bracketable(graph: Any, name: str) -> bool:
    """Whether :func:`bracket_node` can take node ``name`` of the compiled ``graph``."""
    return _node_functions(graph, name) is not None


def bracket_node(
    graph: Any,
    name: str,
    run: Callable[[Node, Any, Any], Any],
    arun: Callable[[Node, Any, Any], Awaitable[Any]],
) -> bool:
    """Make node ``name`` of the compiled ``graph`` call ``run(node, state, runtime)`` (or
    ``arun``) instead, where ``node(state, runtime)`` is the node's own function. ``False``
    (nothing changed) when it cannot (:func:`bracketable`)."""
    found = _node_functions(graph, name)
    if found is None:
        return False
    node, bound, func, afunc = found

    def inner(state: Any, runtime: Any) -> Any:
        return func(state, runtime=runtime)

    async def ainner(state: Any, runtime: Any) -> Any:
        return await afunc(state, runtime=runtime)

    def bracketed(state: Any, runtime: Any) -> Any:
        return run(inner, state, runtime)

    async def abracketed(state: Any, runtime: Any) -> Any:
        return await arun(ainner, state, runtime)

    replacement = _RunnableCallable(bracketed, abracketed, name=bound.name, trace=bound.trace)
    graph.nodes[name] = node.copy({"bound": replacement})
    return True


def _node_functions(graph: Any, name: str) -> tuple[Any, Any, Callable[..., Any], Callable[..., Awaitable[Any]]] | None:
    """The node, its runnable and its two functions, when the runnable is a
    ``RunnableCallable`` of both whose call is given the state and the runtime alone."""
    if _RunnableCallable is None:
        return None
    node = getattr(graph, "nodes", {}).get(name)
    bound = getattr(node, "bound", None)
    if node is None or not isinstance(bound, _RunnableCallable) or bound.func is None or bound.afunc is None:
        return None
    if set(bound.func_accepts) != {"runtime"} or bound.kwargs:
        return None
    return node, bound, bound.func, bound.afunc
