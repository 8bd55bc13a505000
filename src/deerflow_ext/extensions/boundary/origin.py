"""Whose cancellation is it? The one test every fail-open boundary shares.

``asyncio.CancelledError`` reaches an ``except`` around extension code for two unrelated
reasons (docs/SPEC.md, "Notifications and fail-open": cancellation by origin):

* the **host task is being cancelled** — the user pressed stop, the Gateway is shutting
  down. That must propagate: the remaining contributors are not called.
* the **extension raised it itself** — typically an internal timeout built on cancellation.
  That is a failure like any other: attributed, contained, and the run goes on. Letting it
  escape would end an otherwise successful run as cancelled.

The exception type cannot tell them apart; the task can. Only a genuine ``Task.cancel()``
increments ``asyncio.Task.cancelling()`` (and ``asyncio.timeout`` undoes its own with
``uncancel()``), so the origin is "the host" exactly when the current task has a pending
cancellation request. Outside a running task (synchronous loading, a worker thread) there is
nothing of the host's to cancel, so any ``CancelledError`` there is the extension's own.

``KeyboardInterrupt`` and ``SystemExit`` are not decided here: they always propagate, so
callers catch ``(Exception, asyncio.CancelledError)`` and never ``BaseException``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["cancellation_requests", "host_is_cancelling", "is_host_cancellation", "requests_of"]


#: ``requests_of(task)``: the cancellation requests pending on ``task``
#: (``Task.cancelling()``), for a caller that holds its task: the method itself, so a
#: notification, which compares the count before and after its contributors, pays no
#: Python call frame for it.
requests_of: Callable[[asyncio.Task[Any]], int] = asyncio.Task.cancelling


def cancellation_requests() -> int:
    """The cancellation requests pending on the task running this code (0 outside a task)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop in this thread
        return 0
    return requests_of(task) if task is not None else 0


def host_is_cancelling(baseline: int = 0) -> bool:
    """Is the task running this code being cancelled by someone (more than ``baseline`` times)?"""
    return cancellation_requests() > baseline


def is_host_cancellation(exc: BaseException, baseline: int = 0) -> bool:
    """``exc`` is a ``CancelledError`` *and* the current task is being cancelled: propagate it.

    Everything else an extension raises — its own ``CancelledError`` included — is the
    extension's failure, to be attributed and contained. ``baseline`` is for cleanup that
    runs *because* the task was cancelled (services stopped after a cancelled startup): the
    request already being handled is not a new one, so only a request beyond it counts.
    """
    return isinstance(exc, asyncio.CancelledError) and host_is_cancelling(baseline)
