"""The host's middleware ordering invariants, and the check of a final composed stack.

LangChain reads a middleware list as nesting: ``middleware[0]`` is the *outermost* model and
tool wrapper, ``before_*`` hooks run in list order and ``after_*`` hooks in reverse. So the
list order is behaviour, and this module states which orders the host relies on:

* the host's own classes keep the documented relative order (``HOST_STACK_ORDER``), e.g.
  the retry layer precedes the tool error handler, and ``ClarificationMiddleware`` is last;
* every contributed middleware keeps the promise of its ``Placement``: ``MODEL_LOGICAL``
  sits outside the retry layer (one logical call), ``MODEL_PHYSICAL`` inside every request
  transform (each attempt, as sent), ``TOOL_VISIBLE`` outermost on the tool axis,
  ``TOOL_RAW`` innermost on it, ``STANDARD`` in the extension slot after every host
  middleware but the last.

Host classes absent from a stack (subagent stacks omit some) are skipped, never assumed.
These are the spec's ordering invariants (docs/SPEC.md, "Runtime slice": placement, not
index; ordering invariants). How composition makes a valid stack cheaper to run (fused
groups, carried groups) is ``wrap_fusion.py``'s and ``carry.py``'s, which check their own work.

The middleware classes live in ``deerflow_ext.agents.middlewares``, which imports this
package; referencing them at module scope here would point the dependency backwards and
close an import cycle. The tables are therefore built by *calling* a function the first
time a stack is checked — inside agent construction, when the middleware layer is loaded.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deerflow_extension_api import Placement

from .hooks import implemented_hooks
from .isolation import IsolatedMiddleware

__all__ = ["OrderingConstraint", "OrderingError", "assert_ordering", "core_ordering_constraints", "stack_label"]

_MODEL_HOOKS = frozenset({"wrap_model_call", "awrap_model_call"})
_TOOL_HOOKS = frozenset({"wrap_tool_call", "awrap_tool_call"})


class OrderingError(ValueError):
    """A composed stack breaks an ordering invariant.

    ``extension`` names the contribution whose placement promise is broken (the one to
    blame, and to drop when failing open); it is ``None`` when the host's own order is broken.
    """

    def __init__(self, message: str, *, extension: str | None = None) -> None:
        super().__init__(f"Extension {extension}: {message}" if extension else message)
        self.extension = extension


@dataclass(frozen=True)
class OrderingConstraint:
    """``before`` must come before ``after`` whenever both are in a stack."""

    before: type
    after: type
    reason: str


@dataclass(frozen=True)
class _HostRoles:
    order: tuple[type, ...]
    retry_layer: type
    last: type


@functools.cache
def _host_roles() -> _HostRoles:
    from deerflow_ext.agents import middlewares as host

    return _HostRoles(tuple(host.HOST_STACK_ORDER), host.LLMErrorHandlingMiddleware, host.ClarificationMiddleware)


@functools.cache
def core_ordering_constraints() -> tuple[OrderingConstraint, ...]:
    """Every pair of host classes in documented order (all pairs, so a missing class in
    between never hides an inversion of its neighbours). Resolved on first call."""
    order = _host_roles().order
    return tuple(
        OrderingConstraint(order[i], order[j], f"documented host order: {order[i].__name__} wraps {order[j].__name__}")
        for i in range(len(order))
        for j in range(i + 1, len(order))
    )


def stack_label(mw: Any) -> str:
    """How a stack entry is named in an ordering error: a contribution by its class and placement."""
    if isinstance(mw, IsolatedMiddleware):
        placement = mw.placement.name if mw.placement is not None else "unplaced"
        return f"{type(mw.inner).__name__} ({placement})"
    return type(mw).__name__


def _hooks(mw: Any) -> frozenset[str]:
    # A contribution's own hooks, whatever its class exposes to LangChain (isolation.py).
    return mw.wrapped_hooks if isinstance(mw, IsolatedMiddleware) else implemented_hooks(type(mw))


def _placement(mw: Any) -> Placement | None:
    return mw.placement if isinstance(mw, IsolatedMiddleware) else None


def assert_ordering(stack: Sequence[Any]) -> None:
    """Raise :class:`OrderingError` unless ``stack`` satisfies every host invariant.

    Host order is checked first, because a broken host order is nobody's extension's fault
    and blaming one would hide the real bug.
    """
    roles = _host_roles()
    host_index: dict[type, int] = {}
    for index, mw in enumerate(stack):
        if not isinstance(mw, IsolatedMiddleware):
            for cls in roles.order:
                if isinstance(mw, cls):
                    host_index.setdefault(cls, index)
    for constraint in core_ordering_constraints():
        before, after = host_index.get(constraint.before), host_index.get(constraint.after)
        if before is not None and after is not None and before > after:
            raise OrderingError(
                f"{constraint.after.__name__} precedes {constraint.before.__name__} ({constraint.reason})"
            )
    last = host_index.get(roles.last)
    if last is not None and last != len(stack) - 1:
        raise OrderingError(f"{roles.last.__name__} must be last, found {stack_label(stack[-1])} after it")

    host_positions = sorted(i for i, mw in enumerate(stack) if not isinstance(mw, IsolatedMiddleware))
    retry = host_index.get(roles.retry_layer)
    for index, mw in enumerate(stack):
        if isinstance(mw, IsolatedMiddleware):
            _check_placement(stack, index, mw, host_positions, retry, last)


def _check_placement(
    stack: Sequence[Any],
    index: int,
    mw: IsolatedMiddleware,
    host_positions: list[int],
    retry: int | None,
    last: int | None,
) -> None:
    placement = mw.placement

    def broken(promise: str, other: int) -> OrderingError:
        return OrderingError(
            f"{stack_label(mw)} at position {index} must be {promise}, but {stack_label(stack[other])} is at {other}",
            extension=mw.extension,
        )

    if placement is None:
        raise OrderingError(f"{stack_label(mw)} at position {index} has no placement", extension=mw.extension)
    if placement is Placement.STANDARD:
        # The extension slot: after every host middleware except the final one.
        for other in host_positions:
            if other != last and other > index:
                raise broken("in the extension slot, after every host middleware", other)
    elif placement is Placement.MODEL_LOGICAL:
        if retry is not None and retry < index:
            raise broken("outside the retry layer", retry)
    elif placement is Placement.MODEL_PHYSICAL:
        # Inside every request transform. TOOL_RAW contributions sit innermost on the tool
        # axis, so one that also wraps model calls may be inside a MODEL_PHYSICAL one.
        for other in range(index + 1, len(stack)):
            peer = _placement(stack[other])
            if _hooks(stack[other]) & _MODEL_HOOKS and peer not in (
                Placement.MODEL_PHYSICAL,
                Placement.TOOL_RAW,
            ):
                raise broken("inside every model-call wrapper", other)
    elif placement is Placement.TOOL_VISIBLE:
        for other in range(index):
            if _hooks(stack[other]) & _TOOL_HOOKS and _placement(stack[other]) is not Placement.TOOL_VISIBLE:
                raise broken("outermost on the tool axis", other)
    elif placement is Placement.TOOL_RAW:
        for other in range(index + 1, len(stack)):
            if _hooks(stack[other]) & _TOOL_HOOKS and _placement(stack[other]) is not Placement.TOOL_RAW:
                raise broken("innermost on the tool axis", other)
