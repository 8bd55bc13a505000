"""Background tasks this process runs beside its requests: stopping one, and repeating one.

Every closer (``runtime/``, the cron scheduler, the webhook courier, the sweepers) ends its
helper tasks the same way: cancel it, then wait until it has really ended, so that nothing
it does can overlap what the closer does next (closing the engine, leaving the presence
table), and swallow the ``CancelledError`` that the wait re-raises. One function,
:func:`stop_task`, so that the closers cannot drift apart on that order.

:class:`Sweeper` is the periodic kind (the TTL sweeps, the webhook outbox's pruning): it
sleeps first (startup already has enough to do) and costs nothing between sweeps, one timer
on the event loop, no query and nothing on a run's path. A sweep's own work is its owner's
(bounded batches off the event loop); a sweep that fails (a database restarting) is logged
and tried again at the next interval, never raised into the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Sweeper", "stop_task"]

logger = logging.getLogger("deerflow_ext.background")


async def stop_task(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` and wait for it to end; nothing to do for ``None``."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


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
