"""The notification budget's clock: one deadline timer per event loop, shared by every notification.

The spec gives each lifecycle notification one budget shared by all its contributors
(docs/SPEC.md, "Notifications and fail-open": one shared budget); ``notify.py`` states what
happens when it is spent. This module is how the deadline is noticed cheaply. Arming and
cancelling a ``TimerHandle`` per notification (what ``asyncio.timeout`` does) would cost more
than ten no-op hooks, and almost every notification finishes long before its deadline. So
the loop's one :class:`BudgetTimer` is armed for the earliest deadline among running
notifications and is *not* cancelled when they finish. When it fires it cancels each task
whose budget is spent (its contributor is, by construction, the one suspended at that
moment, since the loop only runs timers while tasks are suspended) and re-arms for the next
deadline if a notification is still running. A steady stream of fast notifications costs one
timer per budget period.

The state of one running notification is a plain list, ``[task, deadline, cancels,
remaining]``, because one is built on every notification and a list display is the cheapest
mutable record Python has (a slotted class or a list subclass costs several times more).
``deadline`` is a ``time.monotonic()`` value; ``cancels`` counts the cancel requests the
timer made on ``task`` for it, which is what tells the timer's cancellation apart from the
host's (``origin.py``); ``remaining`` is the iterator the notification loops over, which the
timer exhausts when the budget is spent. That iterator is unique to the notification and
hashable by identity, so it is also the timer's key for the state.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator
from typing import Any, ClassVar

__all__ = ["CANCELS", "DEADLINE", "REMAINING", "TASK", "UNBOUNDED_STATE", "BudgetTimer", "budget_timer_for"]

TASK, DEADLINE, CANCELS, REMAINING = 0, 1, 2, 3
#: Stands in for the state of an unbounded notification: never registered, never cancelled,
#: so the per-contributor check needs no ``is None`` branch.
UNBOUNDED_STATE: list[Any] = [None, math.inf, 0, iter(())]
_RECANCEL_AFTER = 0.01  # seconds: how soon an overrunning notification is cancelled again

_monotonic = time.monotonic


class BudgetTimer:
    """The single deadline timer of one event loop (see the module docstring).

    An overrunning notification stays registered and is cancelled again every
    ``_RECANCEL_AFTER`` seconds until it exits, so a contributor that swallows the
    cancellation cannot take the rest of the notification past the budget with it.

    Deadlines are ``time.monotonic()`` values, converted to loop time only when arming, so a
    loop with its own clock (uvloop) still fires on time. Touched only from its loop's thread.
    """

    __slots__ = ("__weakref__", "active", "handle", "loop", "when")

    #: The timer :func:`budget_timer_for` handed out last: a process has one notification
    #: loop, so it is nearly always the one asked for, and reading it costs no call.
    last: ClassVar[BudgetTimer | None] = None

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
            if budget[DEADLINE] <= now:
                budget[CANCELS] += 1
                budget[TASK].cancel()
                # Exhaust the notification's iterator over its contributors: should the
                # running one swallow the cancellation, the loop then ends by itself, with no
                # per-contributor check on the fast path.
                deque(budget[REMAINING], maxlen=0)
                budget[DEADLINE] = now + _RECANCEL_AFTER
            upcoming = min(upcoming, budget[DEADLINE])
        if upcoming != math.inf:
            self.arm(upcoming)


_timers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, BudgetTimer] = weakref.WeakKeyDictionary()
_timers_lock = threading.Lock()


def budget_timer_for(loop: asyncio.AbstractEventLoop) -> BudgetTimer:
    """``loop``'s timer, made on first use; a caller on the hot path tries
    :attr:`BudgetTimer.last` first."""
    with _timers_lock:
        timer = _timers.get(loop)
        if timer is None:
            timer = _timers[loop] = BudgetTimer(loop)
    BudgetTimer.last = timer
    return timer
