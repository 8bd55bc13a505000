"""A thread hold's periodic check: a timer, not a task, since most holds end before it is due.

Why: every PostgreSQL hold started a task that waited, inside ``asyncio.wait_for``
(a second task and a timer), for a third of the lease to pass or for the hold to end. A
trivial run ends long before its first refresh is due, yet ending that wait cost the
releasing run two or three turns of a busy event loop before its give-back was even queued:
at 8 clients a give-back took 4 ms where a statement takes 2. Here the refresh is a
``loop.call_later`` timer that starts a task only when it fires, and stopping is cancelling
the timer, with no await.

What a refresh checks (that the hold's session still holds its lock) and what losing it
means stay the coordinator's (``pg_coordinator``): this module only keeps the rhythm. A
refresh that raises or reports nothing refreshed calls ``lost`` once (the coordinator
fences the holder), unless the hold was stopped meanwhile, and then no refresh follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

__all__ = ["LeaseRefresh"]


class LeaseRefresh:
    """Calls ``refresh`` every ``interval`` seconds (after the last one answered) until stopped."""

    __slots__ = ("_interval", "_loop", "_lost", "_name", "_refresh", "_running", "_stopped", "_timer")

    def __init__(
        self,
        refresh: Callable[[], Awaitable[bool]],
        interval: float,
        lost: Callable[[BaseException | None], None],
        *,
        name: str,
    ) -> None:
        self._refresh = refresh
        self._interval = interval
        self._lost = lost
        self._name = name
        self._loop = asyncio.get_running_loop()
        self._running: asyncio.Task[None] | None = None
        self._stopped = False
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(interval, self._due)

    def _due(self) -> None:
        self._timer = None
        self._running = self._loop.create_task(self._once(), name=self._name)

    async def _once(self) -> None:
        error: BaseException | None = None
        if self._stopped:  # stopped between the timer firing and this task's first turn
            self._running = None
            return
        try:
            refreshed = await self._refresh()
        except Exception as exc:
            refreshed, error = False, exc
        finally:
            self._running = None
        if self._stopped:
            return
        if refreshed:
            self._timer = self._loop.call_later(self._interval, self._due)
            return
        self._stopped = True
        self._lost(error)

    def stop(self) -> asyncio.Task[None] | None:
        """No refresh from now on. Returns the refresh in flight, if there is one: a caller
        whose next statement shares its connection waits for it first."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return self._running
