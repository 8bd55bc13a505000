"""A background sweep: one task that runs a sweep function every interval.

It sleeps first (startup already has enough to do; the store's items are also swept once at
startup, ``gateway.app``) and costs nothing between sweeps: one timer on the event loop, no
query and nothing on a run's path. A sweep's own work is bounded batches off the event loop
(``threads``, ``persistence.item_store``); a sweep that fails (a database restarting) is
logged and tried again at the next interval, never raised into the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..background_task import stop_task

__all__ = ["Sweeper"]

logger = logging.getLogger("deerflow_ext.expiry")


class Sweeper:
    """Runs ``sweep`` every ``interval`` seconds once :meth:`start` ed, until :meth:`stop`.

    :attr:`completed` counts the sweeps that ended (failed ones included): a test waits for
    it to move by two to know a whole sweep began after what it set up."""

    def __init__(self, name: str, sweep: Callable[[], Awaitable[Any]], interval: float) -> None:
        self.name = name
        self.interval = interval
        self._sweep = sweep
        self._task: asyncio.Task[None] | None = None
        self.completed = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"deerflow-{self.name}-sweeper")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_task(task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._sweep()
            except Exception:
                logger.exception("%s sweep failed; trying again in %.0fs", self.name, self.interval)
            self.completed += 1
