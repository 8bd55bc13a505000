"""Who holds the memory: a watchdog thread that names the extension running when the
Gateway's resident memory passes a bound the operator set.

Memory cannot be charged to the hook that allocated it: Python does not keep that, and an
extension's allocation outlives its hook. What can be said is *who was running* when the
process grew past the bound, which is where an operator looks first: a hook that reads a
1 GiB file into memory is running while RSS climbs. So a thread samples the process's RSS
(``/proc/self/statm``) every ``interval`` seconds and, the first time it passes
``limit_mib``, reads the event loop's stack the way :mod:`.loopwatch` does and names the
extension hook on it, in the attributed line every extension failure gets::

    Extension hog_ext:install: on_task_start was running when the Gateway's memory
    reached 1408 MiB (bound 1024 MiB)

The hook may be running (a synchronous block: its frame is on the loop thread's stack) or
awaiting (an async hook holding the memory across an ``await``): the watchdog also asks the
loop to look at every task's chain of awaits for an extension site, innermost first, and
names each it finds (the memory may be any of theirs: several hooks run at once). When
neither finds extension code the line names the host code instead. One line per excursion:
the watchdog speaks again only after RSS fell back below 90% of the bound. It never frees,
kills or interrupts anything: a process that must not pass a size is capped from outside
(a cgroup, ``ulimit -v``), as docs/RELIABILITY.md says.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from types import FrameType
from typing import Any

from .diagnostics import log_extension_failure
from .loopwatch import RunningHook, code_position, first_site, running_hook, thread_frame

__all__ = ["MemoryWatchdog", "awaiting_hook", "resident_mib"]

logger = logging.getLogger("deerflow_ext.extensions")

_PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def resident_mib() -> float:
    """This process's resident set, in MiB (Linux; 0.0 where ``/proc`` has no answer)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_MIB
    except (OSError, IndexError, ValueError):
        return 0.0


class MemoryWatchdog:
    """Samples RSS and names the extension hook on the loop thread when it passes ``limit_mib``.

    Construct and :meth:`start` on the loop's own thread; :meth:`stop` from anywhere.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, limit_mib: float, *, interval: float = 0.25) -> None:
        self.loop = loop
        self.limit_mib = limit_mib
        self.interval = interval
        self.loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="deerflow-memory-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.interval + 1)

    def _watch(self) -> None:
        over = False
        while not self._stop.wait(self.interval):
            rss = resident_mib()
            if not over and rss >= self.limit_mib:
                over = True
                self._report(rss)
            elif over and rss < 0.9 * self.limit_mib:
                over = False

    def _report(self, rss: float) -> None:
        reached = f"the Gateway's memory reached {rss:.0f} MiB (bound {self.limit_mib:.0f} MiB)"
        frame = thread_frame(self.loop_thread)
        running = running_hook(frame)
        if running is not None:  # on the loop right now (it may block it: then the look below waits)
            log_extension_failure(
                running.extension, f"{running.hook} was running when {reached}", level=logging.WARNING
            )
        try:
            self.loop.call_soon_threadsafe(self._report_awaiting, reached, running, code_position(frame))
        except RuntimeError:  # the loop closed
            if running is None:
                logger.warning("%s while %s was running", reached, code_position(frame))

    def _report_awaiting(self, reached: str, running: RunningHook | None, where: str) -> None:
        """On the loop: name every other extension hook a task is awaiting in (the memory may
        be any of theirs), else, when no extension was named at all, the host code."""
        hooks = {hook for task in asyncio.all_tasks(self.loop) if (hook := awaiting_hook(task)) is not None}
        hooks.discard(running)
        for hook in sorted(hooks):
            log_extension_failure(hook.extension, f"{hook.hook} was awaiting when {reached}", level=logging.WARNING)
        if not hooks and running is None:
            logger.warning("%s while %s was running", reached, where)


def awaiting_hook(task: asyncio.Task[Any]) -> RunningHook | None:
    """The innermost extension site on ``task``'s chain of awaits (a suspended coroutine's
    frames do not link to their callers, so the chain is followed from the task's own)."""
    frames: list[FrameType] = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return first_site(reversed(frames))
