"""One notification, delivered under the spec's fail-open rules.

Every task-lifecycle hook and observer is called through :func:`deliver`, so the rules the
spec states once (docs/SPEC.md, "Notifications and fail-open"; docs/DESIGN.md §5) hold
everywhere:

* **Registration order.** Contributors run one after another in the order of the plan they
  come in, which is registration order; one failure never skips the next contributor.
* **Isolation.** A contributor's exception is logged with its entry point and contained.
* **One shared budget.** One budget covers all contributors of one notification; at the
  deadline the running contributor is cancelled and every later one is skipped, each with
  the spec's line (:func:`_report_spent`)::

      Extension acme_audit:install: on_task_start timed out for task 7f3c...; the 3.0s notification budget was spent
      Extension acme_costs:install: on_task_start skipped for task 7f3c...; the 3.0s notification budget was spent

* **Cancellation by origin.** A ``CancelledError`` is judged by where it came from, not by
  its class (``origin.py``): a genuine cancellation of the host task propagates and nobody
  else is called; one a contributor raised itself (an internal timeout built on
  cancellation, say) is contained like any other exception, because otherwise it would end
  an otherwise successful run as cancelled. ``KeyboardInterrupt`` and ``SystemExit`` always
  propagate, attributed to the contributor that raised them (``exits.py``).

What this module is handed, and what it leans on, lives elsewhere: the :class:`Plan` (who is
called, with which bound methods, whether any of them can suspend, the meter) is made and
kept once per contributions and method by ``notify_plans.py``, which is also the entry
callers use (``_notify_each``); the deadline is noticed by the loop's one shared timer
(``budget_timer.py``); which loop a notification runs on is ``notification_loop.py``'s; the
task-lifecycle notifications themselves are ``lifecycle.py``'s.

Both the budget and the origin test act only where a contributor *suspends*: asyncio can
cancel a coroutine only at an ``await`` that yields to the loop, and a cancellation of the host
task can only be delivered there. A hook compiled without any suspension point (the common
"write a few keys into the task store" hook) can therefore never be interrupted, nor receive
the host's cancellation; whatever it raises is its own. When the plan says no contributor
can suspend, :func:`deliver` calls them without that machinery, and behaves exactly as the
full path would.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from deerflow_ext.exception_text import exception_text

from ..boundary.diagnostics import log_extension_failure, logger
from ..boundary.exits import PROCESS_EXITS, attribute_exit
from ..boundary.loopwatch import RunningHook, register_site
from ..boundary.origin import requests_of
from ..operator_view.hook_metrics import NotificationMeter, count_skip
from .budget_timer import CANCELS, UNBOUNDED_STATE, BudgetTimer, budget_timer_for

if TYPE_CHECKING:
    from ..contract.snapshot import Contribution

__all__ = ["DEFAULT_NOTIFY_BUDGET", "TRACE_EXTENSIONS", "Calls", "Plan", "deliver"]

Calls = tuple[Callable[..., Awaitable[object]], ...]

DEFAULT_NOTIFY_BUDGET = 3.0
"""Seconds shared by all contributors of one lifecycle notification (the spec's 3 seconds).

Read at call time, so tests may lower it with ``monkeypatch.setattr``.
"""

TRACE_EXTENSIONS = os.environ.get("DEERFLOW_TRACE_EXTENSIONS") == "1"
"""Log every contributor call at INFO.

pluggy's own tracing never fires because the host does not call ``pm.hook``. Read once at
import (an environment lookup per notification would cost more than a no-op hook).
"""

_INF = math.inf
_monotonic = time.monotonic
# asyncio.current_task() looks the running loop up again in pure Python on 3.11; passing the
# loop deliver already holds keeps the public API at the cost of the private dict.
_current_task = asyncio.current_task
_get_running_loop = asyncio.get_running_loop


class Plan(NamedTuple):
    """Who one notification calls, in registration order, as ``notify_plans.py`` resolves it.

    :func:`deliver` reads the fields by index on its fast path; the order is part of the type.
    """

    source: Sequence[Contribution[Any]]  # the contributions the plan was made from
    method: str  # the hook called
    contributions: tuple[Contribution[Any], ...]  # those implementing the method, in order
    calls: Calls  # their bound methods, same order
    may_suspend: bool  # False when no call can suspend: deliver's fast path
    meter: NotificationMeter | None  # per-contributor counts and time (metrics.py); None when off


def _index_of(calls: tuple[object, ...], fn: object) -> int:
    # Bound methods are built per plan, so identity finds the one that ran even when the
    # same contributor object is registered twice.
    return next(i for i, candidate in enumerate(calls) if candidate is fn)


def _seconds(budget: float) -> str:
    # The spec prints the budget as "3.0s"; float() keeps "0.05s" and turns 3 into "3.0s".
    return f"{float(budget)}s"


def _report_spent(plan: Plan, start: int, task_id: str, budget: float, *, timed_out: bool) -> None:
    """Warn for the contributor the deadline interrupted (if any) and skip every later one."""
    spent = f"the {_seconds(budget)} notification budget was spent"
    meter = plan.meter
    for i in range(start, len(plan.contributions)):
        verb = "timed out" if timed_out and i == start else "skipped"
        if meter is not None:
            stats = meter.stats[i]
            if verb == "skipped":
                count_skip(stats)
            else:
                stats.overruns += 1
                stats.cancellations += 1
        log_extension_failure(
            plan.contributions[i].extension,
            f"{plan.method} {verb} for task {task_id}; {spent}",
            level=logging.WARNING,
        )


async def deliver(plan: Plan, calls: Calls, args: tuple[Any, ...], task_id: str, budget: float | None) -> None:
    """Call each of ``plan``'s contributors, ``calls[i](*args)``, under the spec's rules.

    ``calls`` is ``plan.calls``, or the same calls wrapped to be timed (``notify_plans.py``).
    ``budget`` ``None`` is :data:`DEFAULT_NOTIFY_BUDGET`; ``math.inf`` means unbounded (the
    inline system-model observations, which the spec gives no budget). The only exceptions
    that leave this function are a genuine cancellation of the calling task,
    ``KeyboardInterrupt`` and ``SystemExit``; the latter two carry the contributor that
    raised them (:func:`~.exits.exit_origin`), and the caller's boundary contains them.

    The budget is enforced where a contributor suspends: the shared timer cancels the
    contributor awaiting at the deadline. Nothing in asyncio can interrupt a contributor that
    blocks the loop synchronously; the budget it spent is enforced at the next suspension of
    a later contributor, which is then the one reported as timed out.

    A contributor that swallows the *host's* cancellation and returns normally delays it to
    the end of this notification instead of losing it: the remaining contributors run (they
    cannot be told apart from a successful notification without checking after every call,
    which the fast path cannot afford) and then ``CancelledError`` is raised.
    """
    if not calls:
        return
    if budget is None:
        budget = DEFAULT_NOTIFY_BUDGET
    if not plan[4] and budget > 0:  # no call can suspend (plan.may_suspend)
        # Each call completes in the step that starts it: nothing can cancel it, no deadline
        # can pass while the loop is ours, and a cancellation of the host task requested
        # meanwhile is delivered at the caller's next ``await``. So every exception here,
        # a CancelledError included, is the contributor's own, except the two that always
        # propagate. Like a contributor that blocks the loop on the full path, one that runs
        # long here spends the budget without being interrupted.
        if TRACE_EXTENSIONS:
            calls = _traced(plan, calls, task_id)
        # The lifecycle hooks' arities spelled out: a call with its arguments in locals is
        # ~10 ns cheaper than one unpacking a tuple, a tenth of this loop's cost per hook.
        if len(args) == 3:
            a, b, c = args
            for call in calls:
                try:
                    await call(a, b, c)
                except BaseException as exc:
                    _fast_failed(plan, calls, call, exc)
        elif len(args) == 4:
            a, b, c, d = args
            for call in calls:
                try:
                    await call(a, b, c, d)
                except BaseException as exc:
                    _fast_failed(plan, calls, call, exc)
        else:
            for call in calls:
                try:
                    await call(*args)
                except BaseException as exc:
                    _fast_failed(plan, calls, call, exc)
        return
    loop = _get_running_loop()  # RuntimeError outside a loop
    task = _current_task(loop)
    if task is None:
        raise RuntimeError("a notification must be delivered inside an asyncio task")
    baseline = requests_of(task)
    if budget <= 0:
        _report_spent(plan, 0, task_id, budget, timed_out=False)
        return
    state = UNBOUNDED_STATE
    timer = None
    remaining = iter(calls)
    if budget != _INF:
        deadline = _monotonic() + budget
        state = [task, deadline, 0, remaining]  # budget_timer.py's layout
        timer = BudgetTimer.last
        if timer is None or timer.loop is not loop:
            timer = budget_timer_for(loop)
        timer.active[remaining] = state
        if deadline < timer.when:
            timer.arm(deadline)
    fn: Callable[..., Awaitable[object]] | None = None
    try:
        for fn in remaining:
            if TRACE_EXTENSIONS:
                _trace(plan, calls, fn, task_id)
            try:
                await fn(*args)
            except PROCESS_EXITS as exc:
                # The spec's rule: it propagates and nobody else is called. Who raised it
                # travels with it, for the boundary that contains it (see exits.py).
                attribute_exit(exc, plan.contributions[_index_of(calls, fn)].extension, plan.method)
                raise
            except BaseException as exc:
                ours = state[CANCELS]
                if requests_of(task) > baseline + ours:
                    # The host task itself is being cancelled: propagate, call nobody else.
                    if plan.meter is not None:
                        plan.meter.stats[_index_of(calls, fn)].cancellations += 1
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    raise asyncio.CancelledError() from exc
                index = _index_of(calls, fn)
                if ours:
                    _report_spent(plan, index, task_id, budget, timed_out=True)
                    return
                _contained(plan, index, exc)
                continue
        if state[CANCELS]:
            # The loop ended early because the timer emptied ``remaining``: the running
            # contributor returned normally although the deadline cancelled it (it swallowed
            # the CancelledError). The budget is spent all the same.
            _report_spent(plan, _index_of(calls, fn), task_id, budget, timed_out=True)
            return
        if requests_of(task) > baseline:
            raise asyncio.CancelledError()
    finally:
        if timer is not None:
            del timer.active[remaining]
            if state[CANCELS]:
                # Withdraw the timer's own cancel requests, as asyncio.timeout() does, so a
                # spent budget never looks like a cancellation to the host.
                for _ in range(state[CANCELS]):
                    task.uncancel()


def _fast_failed(plan: Plan, calls: Calls, call: object, exc: BaseException) -> None:
    """What the fast path does with a contributor's exception: a process exit propagates,
    attributed to it; anything else, a ``CancelledError`` included, is its own (contained)."""
    index = _index_of(calls, call)
    if isinstance(exc, PROCESS_EXITS):
        attribute_exit(exc, plan[2][index].extension, plan.method)
        raise exc
    _contained(plan, index, exc)


def _contained(plan: Plan, index: int, exc: BaseException) -> None:
    """A contributor's own exception: logged with its attribution, counted, and contained."""
    if plan.meter is not None:
        stats = plan.meter.stats[index]
        stats.failures += 1
        if isinstance(exc, asyncio.CancelledError):
            stats.cancellations += 1
    log_extension_failure(plan.contributions[index].extension, f"{plan.method} raised {exception_text(exc)}", exc=exc)


def _traced(plan: Plan, calls: Calls, task_id: str) -> Calls:
    """``calls``, each logging its call first (``DEERFLOW_TRACE_EXTENSIONS=1``).

    Wrapping once per traced notification keeps the per-contributor check out of the fast
    path's loop. A wrapper returns the inner call's awaitable itself, so it adds no
    suspension point: the fast path's reasoning still holds.
    """

    def traced(fn: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
        def call(*args: Any) -> Awaitable[object]:
            _trace(plan, calls, fn, task_id)
            return fn(*args)

        return call

    return tuple(traced(fn) for fn in calls)


def _trace(plan: Plan, calls: Calls, fn: object, task_id: str) -> None:
    extension = plan.contributions[_index_of(calls, fn)].extension
    logger.info("Extension %s: calling %s for task %s", extension, plan.method, task_id)


def _running_contributor(frame: Any) -> RunningHook | None:
    """For the loop watchdog: the contributor a blocked :func:`deliver` frame is calling."""
    names = frame.f_locals
    calls, plan = names.get("calls"), names.get("plan")
    fn = names.get("fn", names.get("call"))
    if not calls or plan is None or fn is None:
        return None
    return RunningHook(plan[2][_index_of(calls, fn)].extension, f"{plan[1]} (task {names['task_id']})")


register_site(deliver, _running_contributor)
