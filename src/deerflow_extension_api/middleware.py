"""Contributing middleware to the agent stack.

A contribution names a semantic placement rather than a list index: the host owns the
stack's ordering invariants and composes it in one place, so an index chosen against
one release's stack would silently land somewhere else in the next.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .policy import HostPolicySnapshot

if TYPE_CHECKING:
    from .data import ExtensionData

__all__ = [
    "AgentBuildContext",
    "AgentScope",
    "MiddlewareContributor",
    "MiddlewarePlacement",
    "Placement",
]


class Placement(enum.StrEnum):
    """Where in the stack a middleware belongs, by what it needs to see.

    ``MODEL_LOGICAL`` sees the model call as the agent means it; ``MODEL_PHYSICAL`` sees
    it as it reaches the provider. ``TOOL_VISIBLE`` sees tool calls as the model sees
    them; ``TOOL_RAW`` sees the raw tool execution. ``STANDARD`` has no such need.

    A ``StrEnum``, as DeerFlow's contract has it: a placement compares equal to its value
    (``Placement.TOOL_VISIBLE == "tool_visible"``), so it can be logged, stored and read
    back from configuration as the plain string.
    """

    MODEL_LOGICAL = "model_logical"
    MODEL_PHYSICAL = "model_physical"
    TOOL_VISIBLE = "tool_visible"
    TOOL_RAW = "tool_raw"
    STANDARD = "standard"


class AgentScope(enum.Flag):
    """Which agents a contribution applies to; ``BOTH`` is ``LEAD | SUBAGENT``."""

    LEAD = enum.auto()
    SUBAGENT = enum.auto()
    BOTH = LEAD | SUBAGENT


@dataclass(frozen=True, slots=True)
class AgentBuildContext:
    """What a contributor may know about the agent being built.

    ``scope`` is ``LEAD`` or ``SUBAGENT``; ``policy`` projects the limits for *this*
    agent (a subagent sees the subagent budget, not the lead's).
    """

    scope: AgentScope
    agent_name: str | None = None
    model_name: str | None = None
    policy: HostPolicySnapshot = field(default_factory=HostPolicySnapshot)


@dataclass(frozen=True, slots=True)
class MiddlewarePlacement:
    """One middleware and where it goes.

    ``order`` breaks ties among contributions with the same placement; equal orders
    keep registration order, so the composed stack is deterministic.
    """

    middleware: Any
    placement: Placement
    scope: AgentScope = AgentScope.BOTH
    order: int = 0


@runtime_checkable
class MiddlewareContributor(Protocol):
    """Called at every agent construction to contribute middleware.

    It runs inside synchronous agent construction, so it must not block. Returning an
    empty sequence (the default) contributes nothing to this agent.
    """

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext) -> Sequence[MiddlewarePlacement]:
        return ()
