"""Each extension's middleware contributions for one agent, asked for, checked and wrapped.

The first step of composition (``stack.py``): every ``contribute_middlewares`` contributor
in the snapshot is asked for its ``MiddlewarePlacement`` list for this agent, under the
spec's fail-open rule (docs/SPEC.md, "Notifications and fail-open" and "Runtime slice"):
a contributor that raises (its own ``CancelledError`` included, ``origin.py``; its
``KeyboardInterrupt``/``SystemExit`` too, ``exits.py``) or answers something that is not a
sequence of placements is one attributed diagnostic and contributes nothing, all or nothing;
a cancellation of the host task propagates. What it contributes in this agent's scope is
wrapped (``isolation.py``), each wrapper numbered for a stable node name.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from langchain.agents.middleware import AgentMiddleware

from deerflow_extension_api import AgentBuildContext, AgentScope, MiddlewarePlacement, Placement

from ..boundary.diagnostics import DiagnosticsList
from ..boundary.exits import EXTENSION_FAILURES
from ..boundary.loopwatch import RunningHook, register_site
from ..boundary.origin import is_host_cancellation
from ..contract.snapshot import LoadedExtensions
from ..operator_view.hook_metrics import call_stats, count_call
from .hooks import node_slug
from .isolation import IsolatedMiddleware, isolate

__all__ = ["Placed", "collect_middlewares"]

_PHASE = "middleware"


class Placed(NamedTuple):
    """A contribution as wrapped; its registration order is its index in :func:`collect_middlewares`' list."""

    extension: str
    middleware: IsolatedMiddleware
    placement: Placement
    order: int


def collect_middlewares(
    extensions: LoadedExtensions, ctx: AgentBuildContext, diagnostics: DiagnosticsList
) -> list[Placed]:
    """Every contribution in ``ctx``'s scope, wrapped, in registration order."""
    placed: list[Placed] = []
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
            placed.append(Placed(extension, wrapped, item.placement, item.order))
    return placed


def _running_contributor(frame: Any) -> RunningHook | None:
    contribution = frame.f_locals.get("contribution")
    return None if contribution is None else RunningHook(contribution.extension, "contribute_middlewares")


register_site(collect_middlewares, _running_contributor)


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
