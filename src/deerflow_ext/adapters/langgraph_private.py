"""LangGraph's private state-schema reader (``langgraph.graph.state._get_channels``).

Used by node-hook fusion (``agents/node_fusion.py``): a fused node runs several middleware
hooks in one graph step, so between two of them it must apply the first one's update the
way the graph would have, through each state key's channel (a reducer such as
``add_messages``, or a plain last value). ``StateGraph`` derives those channels from the
state schema with ``_get_channels(schema) -> (channels, managed, type_hints)``; this is the
one place that calls it.

Fallback: without it (or when it stops answering in that shape) nothing is fused: every
hook stays its own graph node, which only costs speed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.channels.base import BaseChannel

__all__ = ["state_channels"]


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
