"""The scheduler: one background task per Gateway process that sleeps until the earliest
``next_run_date``, claims what is due and fires it.

It costs nothing where no cron exists: one query at start finds no date, and the task then
waits on an event with no timeout until a create or an update through this process wakes it
(:meth:`Scheduler.changed`; on PostgreSQL a change through another process wakes it too,
by NOTIFY on the run-signal channel: ``CronStore``'s ``notify``). With crons, it sleeps until
the earliest tick, and at most ``recheck`` seconds, a bound on what a missed notification
(a listener reconnecting) can delay.

Firing is the caller's function (the Gateway's run start); each fired tick is a task of its
own, so a slow run start does not delay the next claim, and an error is logged with the
cron's id, never raised into the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from ..background_task import stop_task
from .schedules import Clock
from .store import CronStore, Due

__all__ = ["Fire", "Scheduler"]

logger = logging.getLogger("deerflow_ext.scheduling")

Fire = Callable[[Due], Awaitable[None]]

_RECHECK_SECONDS = 60.0
_MIN_SLEEP_SECONDS = 0.2
"""A due row another process is claiming right now (skipped, still due) is looked at again
after this, not in a busy loop."""


class Scheduler:
    def __init__(self, store: CronStore, fire: Fire, clock: Clock, *, recheck: float = _RECHECK_SECONDS) -> None:
        self.store = store
        self.clock = clock
        self._fire = fire
        self._recheck = recheck
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._firing: set[asyncio.Task[None]] = set()
        self.fired = 0
        """Ticks this process claimed and fired (tests, logs)."""

    async def start(self) -> None:
        """Read the earliest tick (the one query a Gateway without crons ever makes) and
        start the background task."""
        earliest = await self.store.earliest()
        self._task = asyncio.get_running_loop().create_task(self._run(earliest), name="deerflow-cron-scheduler")

    def changed(self) -> None:
        """A cron was created, changed or deleted through this process: look again."""
        self._woken.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_task(task)
        if self._firing:
            await asyncio.gather(*self._firing, return_exceptions=True)

    async def _sleep(self, earliest: datetime | None) -> None:
        if earliest is None:
            await self._woken.wait()
        else:
            seconds = min(self.clock.seconds_until(earliest), self._recheck)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), max(seconds, 0.0))
        self._woken.clear()

    async def _run(self, earliest: datetime | None) -> None:
        while True:
            await self._sleep(earliest)
            try:
                if earliest is not None and earliest <= self.clock.now():
                    for due in await self.store.claim_due(self.clock.now()):
                        self._spawn(due)
                earliest = await self.store.earliest()
            except Exception:  # a database hiccup: try again after the recheck bound
                logger.exception("cron scheduler: claiming due crons failed; retrying in %.0fs", self._recheck)
                earliest = self.clock.now()  # claim again after the pause
                await asyncio.sleep(self._recheck)
                continue
            if earliest is not None and earliest <= self.clock.now():
                await asyncio.sleep(_MIN_SLEEP_SECONDS)

    def _spawn(self, due: Due) -> None:
        self.fired += 1
        logger.info("cron %s fires its tick %s", due.cron.cron_id, due.tick.isoformat())
        task = asyncio.get_running_loop().create_task(self._fire_one(due))
        self._firing.add(task)
        task.add_done_callback(self._firing.discard)

    async def _fire_one(self, due: Due) -> None:
        try:
            await self._fire(due)
        except Exception as exc:
            logger.warning(
                "cron %s: its run for tick %s did not start: %s", due.cron.cron_id, due.tick.isoformat(), exc
            )
