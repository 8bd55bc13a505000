"""The notification loop: the one event loop extension notifications run on.

The spec's "one loop" rule (docs/SPEC.md, "Notifications and fail-open"): the Gateway's
serving loop is the notification loop. Extensions open clients and pools on it, so a
subagent running on its own loop in a worker thread dispatches its hooks and observations
there instead of touching those resources from a foreign loop. Shutdown is the spec's two
steps: fire-and-forget intake (memory, compaction, cancelled system calls) stops before the
memory flush, and the loop stays registered until in-flight runs and subagents drain, so
their ``on_task_stop`` still runs (``gateway/app.py`` orders them).

A process exit an extension raised on this loop never leaves it: awaited work carries it
back to the caller's task, fire-and-forget work contains it here (``exits.py``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, TypeVar

from deerflow_ext.exception_text import exception_text

from ..boundary.diagnostics import logger
from ..boundary.exits import PROCESS_EXITS, contain_exit

__all__ = ["NotificationLoop", "notification_loop"]

T = TypeVar("T")

_monotonic = time.monotonic


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
