"""Notification plans: who a notification calls, resolved once and handed to ``notify.py``.

Every notifier (docs/SPEC.md, "Notifications and fail-open": the lifecycle bracket, the
system-model and compaction observers) calls
:func:`_notify_each` with a snapshot's contributions and a hook name. Working out who to call
from those on every notification (which contributors implement the hook, their bound
methods, whether any of them can suspend, their meter) would cost more than the no-op hooks
themselves, and the answer is the same for as long as the snapshot lives: its contribution
tuples are immutable. So the answer is a :class:`~.notify.Plan`, made once per
(contributions, method), kept in a :class:`~.memo.Memo` per method, and handed with the
arguments to :func:`~.notify.deliver`, which applies the spec's rules to it.

Two more speed measures live here, each keeping the rules' path free of it:

* **the fast path's licence**: a plan records whether any call can suspend
  (:func:`_cannot_suspend`, through ``adapters/cpython_bytecode.py``); when none can,
  ``deliver`` skips the budget timer and the origin bookkeeping (its docstring says why that
  is exact);
* **sampled timing** (``metrics.py``): a plan's meter counts notifications down; the one that
  reaches zero is delivered through timed wrappers of the plan's calls (:func:`_measured`).
"""

from __future__ import annotations

import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from deerflow_ext.adapters.cpython_bytecode import never_suspends
from deerflow_ext.memo import Memo

from ..operator_view.hook_metrics import NotificationMeter, meter_for
from .notify import Calls, Plan, deliver

if TYPE_CHECKING:
    from ..contract.snapshot import Contribution

__all__ = ["_notify_each", "plan_for"]

_perf_counter = time.perf_counter

_PLANS_LIMIT = 256
#: ``method -> id(contributions) -> plan``: each method's :class:`Memo` table, read here by
#: subscript. Two lookups with keys whose hashes are cached are cheaper than building and
#: hashing an ``(id, method)`` tuple on every notification.
_plans: dict[str, dict[int, Plan]] = {}
_memos: dict[str, Memo[int, Plan]] = {}


def _notify_each(
    contributions: Sequence[Contribution[Any]],
    method: str,
    args: tuple[Any, ...],
    *,
    task_id: str,
    budget: float | None = None,
) -> Coroutine[Any, Any, None]:
    """Notify ``contributions`` of ``method(*args)``: await the result.

    The plan for (``contributions``, ``method``) is found or made here, and the notification
    itself is :func:`~.notify.deliver`'s, which states the rules and what ``budget`` means.
    A plain function returning ``deliver``'s coroutine, so finding the plan costs no
    coroutine of its own.
    """
    try:  # subscripts, not .get(): the specialised dict lookups are the cheapest on this path
        plan = _plans[method][id(contributions)]
        if plan[0] is not contributions:  # plan.source, by index: the hot path
            plan = _build_plan(contributions, method)
    except KeyError:
        plan = _build_plan(contributions, method)
    meter = plan[5]  # plan.meter: one countdown per notification (metrics.py)
    if meter is not None:
        meter.left -= 1
        if meter.left <= 0:  # (not `not`: a racing thread may take it below zero)
            return _measured(plan, meter, args, task_id, budget)
    return deliver(plan, plan[3], args, task_id, budget)


def plan_for(contributions: Sequence[Contribution[Any]], method: str) -> Plan:
    """The plan :func:`_notify_each` uses for (``contributions``, ``method``)."""
    plan = _plans.get(method, {}).get(id(contributions))
    return plan if plan is not None and plan.source is contributions else _build_plan(contributions, method)


def _cannot_suspend(fn: object) -> bool:
    """Whether awaiting ``fn(...)`` provably completes without yielding to the event loop.

    A plain ``async def`` (or a method of one) whose bytecode holds no suspension point runs
    to completion in the step that starts it (``adapters/cpython_bytecode.py``). Anything
    else — a sync callable returning an awaitable, a decorator's wrapper object, a builtin —
    is assumed to suspend, which is always safe: it only means the full machinery runs.
    """
    return never_suspends(fn.__func__ if isinstance(fn, types.MethodType) else fn)


def _build_plan(contributions: Sequence[Contribution[Any]], method: str) -> Plan:
    """The contributors that implement ``method``, with their bound methods, in order.

    The entry holds the contributions themselves, so their ``id`` cannot be reused while it
    is kept. A contributor lacking the method is left out: every hook is optional.
    """
    pairs = [(c, fn) for c in contributions if (fn := getattr(c.contributor, method, None)) is not None]
    calls = tuple(fn for _, fn in pairs)
    may_suspend = not all(_cannot_suspend(fn) for fn in calls)
    meter = meter_for([c.extension for c, _ in pairs], method) if calls else None
    plan = Plan(contributions, method, tuple(c for c, _ in pairs), calls, may_suspend, meter)
    memo = _memos.get(method)
    if memo is None:
        memo = _memos[method] = Memo(limit=_PLANS_LIMIT, on_empty=_flush_meters)
        _plans[method] = memo.table
    memo.put(id(contributions), plan)
    return plan


def _flush_meters(evicted: Iterable[Plan]) -> None:
    """Plans about to be dropped hand their counts over first (``metrics.py``)."""
    for plan in evicted:
        if plan.meter is not None:
            plan.meter.flush()


def _timed(fn: Callable[..., Awaitable[object]], elapsed: list[float], index: int) -> Callable[..., Awaitable[object]]:
    async def call(*args: Any) -> object:
        started = _perf_counter()
        try:
            return await fn(*args)
        finally:
            elapsed[index] += _perf_counter() - started

    return call


async def _measured(
    plan: Plan, meter: NotificationMeter, args: tuple[Any, ...], task_id: str, budget: float | None
) -> None:
    """One notification with every contributor timed (metrics.py says which ones are).

    The timed wrappers are built once per plan and reused; their clock readings go into the
    meter's ``elapsed`` list, which is cleared for each measured notification.
    """
    timing: Calls | None = meter.timing
    if timing is None:
        timing = meter.timing = tuple(_timed(fn, meter.elapsed, i) for i, fn in enumerate(plan.calls))
    elapsed = meter.elapsed
    for i in range(len(elapsed)):
        elapsed[i] = 0.0
    try:
        await deliver(plan, timing, args, task_id, budget)
    finally:
        meter.timed(elapsed)
