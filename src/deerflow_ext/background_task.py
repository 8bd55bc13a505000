"""Stopping a background task this process started (a sweeper, a heartbeat, a watchdog).

Every closer (``runtime/``, the cron scheduler, the webhook courier, the TTL sweepers) ends
its helper tasks the same way: cancel it, then wait until it has really ended, so that
nothing it does can overlap what the closer does next (closing the engine, leaving the
presence table), and swallow the ``CancelledError`` that the wait re-raises. One function,
so that the closers cannot drift apart on that order.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["stop_task"]


async def stop_task(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` and wait for it to end; nothing to do for ``None``."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
