"""Awaited notifications: registration order, isolation, one budget, cancellation by origin.

Every task-lifecycle hook and observer is called through :func:`_notify_each`, so the rules
the spec states once ("Notifications and fail-open") hold everywhere:

* contributors run one after another in registration order, and one failure never skips
  the next contributor;
* one budget is shared by all contributors of one notification; at the deadline the running
  contributor is cancelled and every later one is skipped with a warning;
* a ``CancelledError`` is judged by where it came from, not by its class. Only a genuine
  cancellation of the host task increments ``asyncio.Task.cancelling()``; that propagates.
  A contributor that lets its *own* ``CancelledError`` escape (an internal timeout built on
  cancellation, say) is contained like any other exception, because otherwise it would end
  an otherwise successful run as cancelled.

Contributors are awaited directly, without a Task each: a hook is normally a few dict writes,
and wrapping each in a Task would cost more than the hook. The budget is enforced by one
timer per event loop (:class:`_Watchdog`) that every running notification shares, so a
notification whose contributors never suspend arms no timer at all.

Both the budget and the origin test act only where a contributor *suspends*: asyncio can
cancel a coroutine only at an ``await`` that yields to the loop, and a cancellation of the host
task can only be delivered there. A hook compiled without any suspension point (the common
"write a few keys into the task store" hook) can therefore never be interrupted, nor receive
the host's cancellation; whatever it raises is its own. When every contributor of a
notification is such a hook, :func:`_notify_each` skips that machinery (see
:func:`_cannot_suspend`), and it behaves exactly as the full path would.

The notification *loop* is the Gateway's serving loop. Extensions open clients and pools on
it, so a subagent running on its own loop in a worker thread dispatches its hooks there
instead of touching those resources from a foreign loop (:class:`NotificationLoop`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
import types
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from deerflow_ext.adapters.cpython_bytecode import never_suspends
from deerflow_ext.exception_text import exception_text

from .diagnostics import log_extension_failure, logger
from .exits import PROCESS_EXITS, attribute_exit, contain_exit
from .loopwatch import RunningHook, register_site
from .metrics import NotificationMeter, count_skip, meter_for

if TYPE_CHECKING:
    from deerflow_extension_api import ExtensionData, TaskInfo, TaskOutcome

    from .snapshot import Contribution, LoadedExtensions

__all__ = [
    "DEFAULT_NOTIFY_BUDGET",
    "TRACE_EXTENSIONS",
    "NotificationLoop",
    "_notify_each",
    "notification_loop",
    "notify_task_start",
    "notify_task_stop",
]

T = TypeVar("T")

DEFAULT_NOTIFY_BUDGET = 3.0
"""Seconds shared by all contributors of one lifecycle notification (the spec's 3 seconds).

Read at call time, so tests may lower it with ``monkeypatch.setattr``.
"""

TRACE_EXTENSIONS = os.environ.get("DEERFLOW_TRACE_EXTENSIONS") == "1"
"""Log every contributor call at INFO.

pluggy's own tracing never fires because the host does not call ``pm.hook``. Read once at
import (an environment lookup per notification would cost more than a no-op hook).
"""

_monotonic = time.monotonic
_perf_counter = time.perf_counter
# asyncio.current_task() looks the running loop up again in pure Python on 3.11; passing the
# loop _notify_each already holds keeps the public API at the cost of the private dict.
_current_task = asyncio.current_task
_get_running_loop = asyncio.get_running_loop


# --------------------------------------------------------------------------------------
# The budget: one deadline timer per event loop, shared by every running notification
# --------------------------------------------------------------------------------------
# The state of one running notification is a plain list, ``[task, deadline, cancels,
# remaining]``, because one is built on every notification and a list display is the
# cheapest mutable record Python has (a slotted class or a list subclass costs several
# times more). ``deadline`` is a ``time.monotonic()`` value; ``cancels`` counts the cancel
# requests the watchdog made on ``task`` for it, which is what tells our own cancellation
# apart from the host's; ``remaining`` is the iterator the notification loops over, which
# the watchdog exhausts when the budget is spent. That iterator is unique to the
# notification and hashable by identity, so it is also the watchdog's key for the state.
_TASK, _DEADLINE, _CANCELS, _REMAINING = 0, 1, 2, 3
_INF = math.inf
# Stands in for the state of an unbounded notification: never registered, never cancelled,
# so the per-contributor check needs no ``is None`` branch.
_UNBOUNDED_STATE: list[Any] = [None, math.inf, 0, iter(())]
_RECANCEL_AFTER = 0.01  # seconds: how soon an overrunning notification is cancelled again


class _Watchdog:
    """The single deadline timer of one event loop.

    Arming and cancelling a ``TimerHandle`` per notification would cost more than ten no-op
    hooks, and almost every notification finishes long before its deadline. So the timer is
    armed for the earliest deadline among running notifications and is *not* cancelled when
    they finish. When it fires it cancels each task whose budget is spent — its contributor
    is, by construction, the one suspended at that moment, since the loop only runs timers
    while tasks are suspended — and re-arms for the next deadline if a notification is still
    running. A steady stream of fast notifications costs one timer per budget period.

    An overrunning notification stays registered and is cancelled again every
    ``_RECANCEL_AFTER`` seconds until it exits, so a contributor that swallows the
    cancellation cannot take the rest of the notification past the budget with it.

    Deadlines are ``time.monotonic()`` values, converted to loop time only when arming, so a
    loop with its own clock (uvloop) still fires on time. Touched only from its loop's thread.
    """

    __slots__ = ("__weakref__", "active", "handle", "loop", "when")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.active: dict[Iterator[Any], list[Any]] = {}
        self.handle: asyncio.TimerHandle | None = None
        self.when = math.inf

    def arm(self, deadline: float) -> None:
        """Fire at ``deadline``, which is earlier than the current arming."""
        if self.handle is not None:
            self.handle.cancel()
        self.when = deadline
        self.handle = self.loop.call_at(self.loop.time() + (deadline - _monotonic()), self._fire)

    def _fire(self) -> None:
        self.handle = None
        self.when = math.inf
        now = _monotonic()
        upcoming = math.inf
        for budget in tuple(self.active.values()):
            if budget[_DEADLINE] <= now:
                budget[_CANCELS] += 1
                budget[_TASK].cancel()
                # Exhaust the notification's iterator over its contributors: should the
                # running one swallow the cancellation, the loop then ends by itself, with no
                # per-contributor check on the fast path.
                deque(budget[_REMAINING], maxlen=0)
                budget[_DEADLINE] = now + _RECANCEL_AFTER
            upcoming = min(upcoming, budget[_DEADLINE])
        if upcoming != math.inf:
            self.arm(upcoming)


_watchdogs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = weakref.WeakKeyDictionary()
_watchdogs_lock = threading.Lock()
_last_watchdog: _Watchdog | None = None


def _watchdog_for(loop: asyncio.AbstractEventLoop) -> _Watchdog:
    global _last_watchdog
    with _watchdogs_lock:
        watchdog = _watchdogs.get(loop)
        if watchdog is None:
            watchdog = _watchdogs[loop] = _Watchdog(loop)
    _last_watchdog = watchdog
    return watchdog


# --------------------------------------------------------------------------------------
# Who gets called: bound methods resolved once per (contributions, method)
# --------------------------------------------------------------------------------------
class _Plan(NamedTuple):
    source: Sequence[Contribution[Any]]
    contributions: tuple[Contribution[Any], ...]  # those implementing the method, in order
    calls: tuple[Callable[..., Awaitable[object]], ...]  # their bound methods, same order
    may_suspend: bool  # False when no call can suspend: see _cannot_suspend
    meter: NotificationMeter | None  # per-contributor counts and time (metrics.py); None when off


def _cannot_suspend(fn: object) -> bool:
    """Whether awaiting ``fn(...)`` provably completes without yielding to the event loop.

    A plain ``async def`` (or a method of one) whose bytecode holds no suspension point runs
    to completion in the step that starts it (``adapters/cpython_bytecode.py``). Anything
    else — a sync callable returning an awaitable, a decorator's wrapper object, a builtin —
    is assumed to suspend, which is always safe: it only means the full machinery runs.
    """
    return never_suspends(fn.__func__ if isinstance(fn, types.MethodType) else fn)


# ``method -> id(contributions) -> plan``: two lookups with keys whose hashes are cached
# are cheaper than building and hashing an ``(id, method)`` tuple on every notification.
_plans: dict[str, dict[int, _Plan]] = {}
_PLANS_LIMIT = 256


def _build_plan(contributions: Sequence[Contribution[Any]], method: str) -> _Plan:
    """The contributors that implement ``method``, with their bound methods, in order.

    A snapshot's contribution tuples are immutable and live as long as the snapshot, so the
    lookup is cached. The entry holds the tuple itself, so its ``id`` cannot be reused while
    cached. A contributor lacking the method is left out: every hook is optional.
    """
    pairs = [(c, fn) for c in contributions if (fn := getattr(c.contributor, method, None)) is not None]
    calls = tuple(fn for _, fn in pairs)
    may_suspend = not all(_cannot_suspend(fn) for fn in calls)
    meter = meter_for([c.extension for c, _ in pairs], method) if calls else None
    plan = _Plan(contributions, tuple(c for c, _ in pairs), calls, may_suspend, meter)
    by_source = _plans.setdefault(method, {})
    if len(by_source) >= _PLANS_LIMIT:
        for evicted in by_source.values():
            if evicted.meter is not None:
                evicted.meter.flush()
        by_source.clear()
    by_source[id(contributions)] = plan
    return plan


def _index_of(calls: tuple[Callable[..., Awaitable[object]], ...], fn: object) -> int:
    # Bound methods are built per plan, so identity finds the one that ran even when the
    # same contributor object is registered twice.
    return next(i for i, candidate in enumerate(calls) if candidate is fn)


def _seconds(budget: float) -> str:
    # The spec prints the budget as "3.0s"; float() keeps "0.05s" and turns 3 into "3.0s".
    return f"{float(budget)}s"


def _report_spent(plan: _Plan, start: int, method: str, task_id: str, budget: float, *, timed_out: bool) -> None:
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
            f"{method} {verb} for task {task_id}; {spent}",
            level=logging.WARNING,
        )


async def _notify_each(
    contributions: Sequence[Contribution[Any]],
    method: str,
    args: tuple[Any, ...],
    *,
    task_id: str,
    budget: float | None = None,
    timing: tuple[Callable[..., Awaitable[object]], ...] | None = None,
) -> None:
    """Call ``method(*args)`` on each contributor under the spec's fail-open rules.

    ``timing`` is internal: the plan's calls wrapped to be timed (see :func:`_measured`).

    ``budget`` defaults to :data:`DEFAULT_NOTIFY_BUDGET`; ``math.inf`` means unbounded (the
    inline system-model observations, which the spec gives no budget). The only exceptions
    that leave this function are a genuine cancellation of the calling task,
    ``KeyboardInterrupt`` and ``SystemExit``; the latter two carry the contributor that
    raised them (:func:`~.exits.exit_origin`), and the caller's boundary contains them.

    The budget is enforced where a contributor suspends: the shared watchdog cancels the
    contributor awaiting at the deadline. Nothing in asyncio can interrupt a contributor that
    blocks the loop synchronously; the budget it spent is enforced at the next suspension of
    a later contributor, which is then the one reported as timed out.

    A contributor that swallows the *host's* cancellation and returns normally delays it to
    the end of this notification instead of losing it: the remaining contributors run (they
    cannot be told apart from a successful notification without checking after every call,
    which the fast path cannot afford) and then ``CancelledError`` is raised.
    """
    try:  # subscripts, not .get(): the specialised dict lookups are the cheapest on this path
        plan = _plans[method][id(contributions)]
        if plan[0] is not contributions:  # plan.source, by index: the hot path
            plan = _build_plan(contributions, method)
    except KeyError:
        plan = _build_plan(contributions, method)
    calls = plan[2]  # plan.calls
    if not calls:
        return
    meter = plan[4]  # plan.meter: one countdown per notification (metrics.py)
    if meter is not None:
        if timing is None:
            meter.left -= 1
            if meter.left <= 0:  # (not `not`: a racing thread may take it below zero)
                await _measured(contributions, plan, meter, method, args, task_id, budget)
                return
        else:
            calls = timing
    if budget is None:
        budget = DEFAULT_NOTIFY_BUDGET
    if not plan[3] and budget > 0:  # no call can suspend (plan.may_suspend)
        # Each call completes in the step that starts it: nothing can cancel it, no deadline
        # can pass while the loop is ours, and a cancellation of the host task requested
        # meanwhile is delivered at the caller's next ``await``. So every exception here,
        # a CancelledError included, is the contributor's own, except the two that always
        # propagate. Like a contributor that blocks the loop on the full path, one that runs
        # long here spends the budget without being interrupted.
        if TRACE_EXTENSIONS:
            calls = _traced(plan, calls, method, task_id)
        # The lifecycle hooks' arities spelled out: a call with its arguments in locals is
        # ~10 ns cheaper than one unpacking a tuple, a tenth of this loop's cost per hook.
        if len(args) == 3:
            a, b, c = args
            for call in calls:
                try:
                    await call(a, b, c)
                except BaseException as exc:
                    _fast_failed(plan, calls, call, method, exc)
        elif len(args) == 4:
            a, b, c, d = args
            for call in calls:
                try:
                    await call(a, b, c, d)
                except BaseException as exc:
                    _fast_failed(plan, calls, call, method, exc)
        else:
            for call in calls:
                try:
                    await call(*args)
                except BaseException as exc:
                    _fast_failed(plan, calls, call, method, exc)
        return
    loop = _get_running_loop()  # RuntimeError outside a loop
    task = _current_task(loop)
    if task is None:
        raise RuntimeError("_notify_each must run inside an asyncio task")
    baseline = task.cancelling()
    if budget <= 0:
        _report_spent(plan, 0, method, task_id, budget, timed_out=False)
        return
    state = _UNBOUNDED_STATE
    watchdog = _last_watchdog
    remaining = iter(calls)
    if budget != _INF:
        deadline = _monotonic() + budget
        state = [task, deadline, 0, remaining]
        if watchdog is None or watchdog.loop is not loop:
            watchdog = _watchdog_for(loop)
        watchdog.active[remaining] = state
        if deadline < watchdog.when:
            watchdog.arm(deadline)
    fn: Callable[..., Awaitable[object]] | None = None
    try:
        for fn in remaining:
            if TRACE_EXTENSIONS:
                _trace(plan, calls, fn, method, task_id)
            try:
                await fn(*args)
            except PROCESS_EXITS as exc:
                # The spec's rule: it propagates and nobody else is called. Who raised it
                # travels with it, for the boundary that contains it (see exits.py).
                attribute_exit(exc, plan.contributions[_index_of(calls, fn)].extension, method)
                raise
            except BaseException as exc:
                ours = state[_CANCELS]
                if task.cancelling() > baseline + ours:
                    # The host task itself is being cancelled: propagate, call nobody else.
                    if meter is not None:
                        meter.stats[_index_of(calls, fn)].cancellations += 1
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    raise asyncio.CancelledError() from exc
                index = _index_of(calls, fn)
                if ours:
                    _report_spent(plan, index, method, task_id, budget, timed_out=True)
                    return
                _contained(plan, index, method, exc)
                continue
        if state[2]:  # _CANCELS
            # The loop ended early because the watchdog emptied ``remaining``: the running
            # contributor returned normally although the deadline cancelled it (it swallowed
            # the CancelledError). The budget is spent all the same.
            _report_spent(plan, _index_of(calls, fn), method, task_id, budget, timed_out=True)
            return
        if task.cancelling() > baseline:
            raise asyncio.CancelledError()
    finally:
        if state is not _UNBOUNDED_STATE and watchdog is not None:
            del watchdog.active[remaining]
            if state[2]:  # _CANCELS
                # Withdraw the watchdog's own cancel requests, as asyncio.timeout() does, so
                # a spent budget never looks like a cancellation to the host.
                for _ in range(state[_CANCELS]):
                    task.uncancel()


def _fast_failed(plan: _Plan, calls: tuple[Any, ...], call: object, method: str, exc: BaseException) -> None:
    """What the fast path does with a contributor's exception: a process exit propagates,
    attributed to it; anything else, a ``CancelledError`` included, is its own (contained)."""
    index = _index_of(calls, call)
    if isinstance(exc, PROCESS_EXITS):
        attribute_exit(exc, plan[1][index].extension, method)
        raise exc
    _contained(plan, index, method, exc)


def _contained(plan: _Plan, index: int, method: str, exc: BaseException) -> None:
    """A contributor's own exception: logged with its attribution, counted, and contained."""
    if plan.meter is not None:
        stats = plan.meter.stats[index]
        stats.failures += 1
        if isinstance(exc, asyncio.CancelledError):
            stats.cancellations += 1
    log_extension_failure(plan.contributions[index].extension, f"{method} raised {exception_text(exc)}", exc=exc)


def _timed(fn: Callable[..., Awaitable[object]], elapsed: list[float], index: int) -> Callable[..., Awaitable[object]]:
    async def call(*args: Any) -> object:
        started = _perf_counter()
        try:
            return await fn(*args)
        finally:
            elapsed[index] += _perf_counter() - started

    return call


async def _measured(
    contributions: Sequence[Contribution[Any]],
    plan: _Plan,
    meter: NotificationMeter,
    method: str,
    args: tuple[Any, ...],
    task_id: str,
    budget: float | None,
) -> None:
    """One notification with every contributor timed (metrics.py says which ones are).

    The timed wrappers are built once per plan and reused; their clock readings go into the
    meter's ``elapsed`` list, which is cleared for each measured notification.
    """
    timing = meter.timing
    if timing is None:
        timing = meter.timing = tuple(_timed(fn, meter.elapsed, i) for i, fn in enumerate(plan.calls))
    elapsed = meter.elapsed
    for i in range(len(elapsed)):
        elapsed[i] = 0.0
    try:
        await _notify_each(contributions, method, args, task_id=task_id, budget=budget, timing=timing)
    finally:
        meter.timed(elapsed)


def _traced(
    plan: _Plan, calls: tuple[Callable[..., Awaitable[object]], ...], method: str, task_id: str
) -> tuple[Callable[..., Awaitable[object]], ...]:
    """``calls``, each logging its call first (``DEERFLOW_TRACE_EXTENSIONS=1``).

    Wrapping once per traced notification keeps the per-contributor check out of the fast
    path's loop. A wrapper returns the inner call's awaitable itself, so it adds no
    suspension point: the fast path's reasoning still holds.
    """

    def traced(fn: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
        def call(*args: Any) -> Awaitable[object]:
            _trace(plan, calls, fn, method, task_id)
            return fn(*args)

        return call

    return tuple(traced(fn) for fn in calls)


def _running_contributor(frame: Any) -> RunningHook | None:
    """For the loop watchdog: the contributor a blocked ``_notify_each`` frame is calling."""
    names = frame.f_locals
    calls, plan = names.get("calls"), names.get("plan")
    fn = names.get("fn", names.get("call"))
    if not calls or plan is None or fn is None:
        return None
    return RunningHook(plan[1][_index_of(calls, fn)].extension, f"{names['method']} (task {names['task_id']})")


register_site(_notify_each, _running_contributor)


def _trace(plan: _Plan, calls: tuple[Any, ...], fn: object, method: str, task_id: str) -> None:
    extension = plan.contributions[_index_of(calls, fn)].extension
    logger.info("Extension %s: calling %s for task %s", extension, method, task_id)


# --------------------------------------------------------------------------------------
# The notification loop
# --------------------------------------------------------------------------------------
def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class NotificationLoop:
    """The one event loop extension notifications run on (the Gateway's serving loop).

    Awaited work (:meth:`run`) is dispatched to it from any loop and awaited across loops;
    fire-and-forget work (:meth:`submit`) is scheduled on it from any thread, sync or async.
    Shutdown is two steps because the spec orders them apart: :meth:`close_intake` first
    (before the memory flush), while the loop stays registered so in-flight runs and
    subagents still deliver their ``on_task_stop``; :meth:`reset` only after they drained.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._accepting = True
        self._lock = threading.Lock()
        # Tasks on the registered loop, touched only from that loop's thread. Holding them
        # keeps fire-and-forget work from being garbage collected mid-flight.
        self._inflight: set[asyncio.Task[Any]] = set()

    def register(self, loop: asyncio.AbstractEventLoop) -> None:
        """Make ``loop`` the notification loop and (re)open intake."""
        with self._lock:
            self._loop = loop
            self._accepting = True

    def reset(self) -> None:
        """Forget the loop: the last shutdown step, after in-flight work has drained."""
        with self._lock:
            self._loop = None
            self._accepting = True

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def close_intake(self) -> None:
        """Stop accepting fire-and-forget work; awaited :meth:`run` keeps working."""
        with self._lock:
            self._accepting = False

    @property
    def accepting(self) -> bool:
        """Whether :meth:`submit` would currently schedule work (a loop and open intake)."""
        return self._loop is not None and self._accepting

    def submit(self, coro_factory: Callable[[], Coroutine[Any, Any, Any]], *, what: str = "notification") -> bool:
        """Schedule ``coro_factory()`` on the notification loop without waiting for it.

        Callable from any thread, with or without a running loop. Returns ``False`` when the
        work is dropped — no loop registered, intake closed, or the loop already closed —
        with a DEBUG line naming ``what``. The factory is called on the notification loop,
        so a dropped observation never creates a coroutine that is never awaited.
        """
        loop = self._loop
        if loop is None or not self._accepting or loop.is_closed():
            logger.debug("no notification loop registered; dropping %s", what)
            return False
        try:
            if _running_loop() is loop:
                self._spawn(coro_factory, what)
            else:
                loop.call_soon_threadsafe(self._spawn, coro_factory, what)
        except RuntimeError:  # closed between the check and the call
            logger.debug("no notification loop registered; dropping %s", what)
            return False
        return True

    def _spawn(self, coro_factory: Callable[[], Coroutine[Any, Any, Any]], what: str) -> None:
        try:
            task = asyncio.get_running_loop().create_task(_exits_contained(coro_factory(), what))
        except Exception:
            logger.exception("could not start %s", what)
            return
        self._inflight.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._inflight.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # The coroutines submitted here isolate their own contributors; reaching this
            # means the host's wrapper itself failed.
            logger.error("fire-and-forget notification failed: %s", exception_text(exc), exc_info=exc)

    async def run(self, coro_factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Await ``coro_factory()`` on the notification loop, from whichever loop calls.

        On the notification loop itself, or when none is registered (or it is no longer
        running), the coroutine runs inline. Otherwise it is scheduled there and awaited
        across loops; cancelling the caller cancels the remote task, whose notification then
        sees a genuine cancellation and stops calling contributors. A ``KeyboardInterrupt``
        or ``SystemExit`` an extension raised there is carried back and re-raised in the
        caller's task: raised in the remote task, it would leave the notification loop.
        """
        target = self._loop
        if target is None or target is asyncio.get_running_loop() or not target.is_running():
            return await coro_factory()
        future = asyncio.run_coroutine_threadsafe(_carried(coro_factory()), target)
        outcome = await asyncio.wrap_future(future)
        if isinstance(outcome, _CarriedExit):
            raise outcome.exc  # in the caller's task, whose boundary contains it
        return outcome

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 - the documented API
        """Wait up to ``timeout`` seconds for submitted fire-and-forget work to finish.

        Runs on the notification loop (dispatched there when called from another loop).
        Work still running at the deadline is left running, not cancelled; it is logged.
        """
        target = self._loop
        if target is not None and target is not asyncio.get_running_loop() and target.is_running():
            await self.run(lambda: self.drain(timeout))
            return
        current = asyncio.get_running_loop()
        deadline = _monotonic() + timeout
        # Work submitted from other threads just before the call is queued behind us.
        await asyncio.sleep(0)
        while pending := [t for t in self._inflight if t.get_loop() is current]:
            remaining = deadline - _monotonic()
            if remaining <= 0:
                logger.warning("%d notification(s) still running after the %ss drain", len(pending), timeout)
                return
            await asyncio.wait(pending, timeout=remaining)

    def __repr__(self) -> str:
        state = "accepting" if self.accepting else "closed"
        return f"NotificationLoop(loop={self._loop!r}, {state}, inflight={len(self._inflight)})"


class _CarriedExit(NamedTuple):
    exc: BaseException


async def _carried(coro: Coroutine[Any, Any, T]) -> T | _CarriedExit:
    """``coro``'s result, or the process exit it raised, as a value (see ``run``)."""
    try:
        return await coro
    except PROCESS_EXITS as exc:
        return _CarriedExit(exc)


async def _exits_contained(coro: Coroutine[Any, Any, Any], what: str) -> None:
    """Fire-and-forget work has no caller to hand a process exit to: it ends here, logged."""
    try:
        await coro
    except PROCESS_EXITS as exc:
        contain_exit(exc, where=what)


notification_loop = NotificationLoop()
"""The process-wide notification loop; the Gateway lifespan registers its serving loop."""


async def _dispatch(
    contributions: Sequence[Contribution[Any]],
    method: str,
    args: tuple[Any, ...],
    task_id: str,
    budget: float | None,
) -> None:
    target = notification_loop.loop
    if target is None or target is asyncio.get_running_loop():
        await _notify_each(contributions, method, args, task_id=task_id, budget=budget)
    else:
        await notification_loop.run(lambda: _notify_each(contributions, method, args, task_id=task_id, budget=budget))


async def notify_task_start(
    ext: LoadedExtensions, task_store: ExtensionData, info: TaskInfo, *, budget: float | None = None
) -> None:
    """Await every ``on_task_start`` on the notification loop within one budget."""
    contributions = ext.task_lifecycle
    if not contributions:
        return
    await _dispatch(contributions, "on_task_start", (ext.app_store, task_store, info), info.task_id, budget)


async def notify_task_stop(
    ext: LoadedExtensions,
    task_store: ExtensionData,
    info: TaskInfo,
    outcome: TaskOutcome,
    *,
    budget: float | None = None,
) -> None:
    """Await every ``on_task_stop``, with a budget of its own (separate from the start's)."""
    contributions = ext.task_lifecycle
    if not contributions:
        return
    await _dispatch(contributions, "on_task_stop", (ext.app_store, task_store, info, outcome), info.task_id, budget)
