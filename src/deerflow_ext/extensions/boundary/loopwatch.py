"""Who is blocking the event loop: a watchdog thread that names the extension.

Every async hook runs on the Gateway's one event loop. A hook that blocks it — ``time.sleep``,
a synchronous HTTP call, a busy loop — stalls every request and every run for as long as it
blocks, and asyncio cannot interrupt it: the 3-second lifecycle budget, the service timeouts
and uvicorn's own timers only fire once the loop runs again (``/health`` took up
to 9.9 s behind a ``time.sleep(10)`` in a hook, and nothing named the extension).

:class:`LoopWatchdog` is a daemon thread that posts a heartbeat to the loop every
``threshold / 4`` seconds. When a heartbeat stays unanswered for ``threshold`` seconds the
loop is blocked, and the thread reads the loop thread's stack (``sys._current_frames``) to
find the extension code that is running: each host site that calls extension code registers
a *reader* (:func:`register_site`) that names the extension and hook from that site's frame.
The lookup costs nothing on the hot path — it runs only on the watchdog thread, only while
the loop is already blocked. Two lines per stall, attributed like every other extension
failure::

    Extension slow_ext:install: on_task_start is blocking the event loop (1.0s so far); every request waits
    Extension slow_ext:install: on_task_start blocked the event loop for 9.9s

The frames between a wrap hook and the downstream call it made belong to the host (or to
the next extension inward), so a handler frame (:data:`DOWNSTREAM`) hands the blame to the
site *outside* the next one.

**Services are interrupted.** A service's ``start``/``stop`` is bounded by its timeout, but a
synchronous block would hold shutdown — and the flush of every service stopped after it —
for as long as it lasts. When the loop runs in the main thread (``deerflow-ext serve``), the
watchdog can end such a block: past the site's bound it sends ``SIGUSR2`` to the main thread,
whose handler raises :class:`HookBlocked` *only if* the blocked frame is still inside that
site (a signal arriving anywhere else is ignored); the service is then recorded as failed
and the next one stops. ``time.sleep`` and Python loops are interruptible this way; a C call
that retries through signals is not, and then the process-exit bound applies
(``gateway/serve.py``). Lifecycle hooks, middleware and observers are only named, never
interrupted: the spec gives them no such bound, and an exception out of the middle of
arbitrary extension code is a last resort kept for shutdown's sake.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from types import CodeType, FrameType
from typing import Any, NamedTuple

from .diagnostics import log_extension_failure

__all__ = [
    "DEFAULT_BLOCK_THRESHOLD",
    "DOWNSTREAM",
    "HookBlocked",
    "LoopWatchdog",
    "RunningHook",
    "code_position",
    "first_site",
    "register_site",
    "running_hook",
    "thread_frame",
]

logger = logging.getLogger("deerflow_ext.extensions")

DEFAULT_BLOCK_THRESHOLD = 1.0
"""Seconds without a heartbeat after which the loop counts as blocked."""

_INTERRUPT_SIGNAL = signal.SIGUSR2


class RunningHook(NamedTuple):
    """The extension code a blocked loop is running, as a site's reader names it."""

    extension: str
    hook: str
    interrupt_after: float | None = None  # seconds; only sites with a bound of their own


class HookBlocked(BaseException):
    """Raised into extension code that blocked the loop past its site's bound (services only).

    A ``BaseException`` so that an extension's ``except Exception`` cannot swallow it.
    """


DOWNSTREAM = RunningHook("", "")
"""A reader's answer for a handler frame: the code inside it is not the next site's."""

Reader = Callable[[FrameType], RunningHook | None]
_sites: dict[CodeType, Reader] = {}


def register_site(function: Callable[..., Any], reader: Reader) -> None:
    """Let ``reader`` name the extension code running under ``function``'s frames."""
    _sites[function.__code__] = reader


def thread_frame(thread_id: int) -> FrameType | None:
    """The innermost frame ``thread_id`` is executing (CPython's ``sys._current_frames``).

    The one use of that private function in the host; ``tests/extensions/test_loopwatch.py``
    fails loudly if it stops answering.
    """
    return sys._current_frames().get(thread_id)


def _site_hook(frame: FrameType) -> RunningHook | None:
    reader = _sites.get(frame.f_code)
    if reader is None:
        return None
    try:
        return reader(frame)
    except Exception:  # a frame in an unexpected state: say nothing rather than guess
        return None


def first_site(frames: Iterable[FrameType]) -> RunningHook | None:
    """The first registered site among ``frames`` (innermost first) that names extension code;
    a handler frame (:data:`DOWNSTREAM`) passes the blame to the site outside the next one."""
    skip = 0
    for frame in frames:
        found = _site_hook(frame)
        if found is DOWNSTREAM:
            skip += 1
        elif found is not None:
            if not skip:
                return found
            skip -= 1
    return None


def running_hook(frame: FrameType | None) -> RunningHook | None:
    """The innermost registered site on ``frame``'s stack that names extension code."""
    return first_site(_outwards(frame))


def _outwards(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def code_position(frame: FrameType | None) -> str:
    """``function (file:line)`` of ``frame``, for log lines about code nobody is attributed for."""
    if frame is None:
        return "unknown code"
    code = frame.f_code
    return f"{code.co_qualname} ({code.co_filename}:{frame.f_lineno})"


class LoopWatchdog:
    """Names the extension that blocks ``loop``; interrupts a blocked service in the main thread.

    Construct and :meth:`start` on the loop's own thread; :meth:`stop` from anywhere.
    """

    def __init__(self, loop: Any, *, threshold: float = DEFAULT_BLOCK_THRESHOLD) -> None:
        self.loop = loop
        self.threshold = threshold
        self.loop_thread = threading.get_ident()
        self._lock = threading.Lock()
        self._sent_at: float | None = None  # heartbeat posted and not yet answered
        self._blamed: RunningHook | None = None
        self._reported: str | None = None  # the stall being reported, as text
        self._interrupt: RunningHook | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous_handler: Any = None
        self._can_interrupt = False

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.loop_thread == threading.main_thread().ident:
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(_INTERRUPT_SIGNAL) == signal.SIG_DFL:  # never take over a handler
                    self._previous_handler = signal.signal(_INTERRUPT_SIGNAL, self._on_signal)
                    self._can_interrupt = True
        self._thread = threading.Thread(target=self._watch, name="deerflow-loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2 * self.threshold + 1)
        if self._can_interrupt and threading.get_ident() == threading.main_thread().ident:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(_INTERRUPT_SIGNAL, self._previous_handler)
            self._can_interrupt = False

    # -- the watchdog thread -----------------------------------------------------------------
    def _watch(self) -> None:
        interval = self.threshold / 4
        while not self._stop.wait(interval):
            with self._lock:
                sent = self._sent_at
                if sent is None:
                    self._sent_at = time.monotonic()
            if sent is None:
                try:
                    self.loop.call_soon_threadsafe(self._beat)
                except RuntimeError:  # the loop closed: nothing left to watch
                    return
                continue
            blocked = time.monotonic() - sent
            if blocked >= self.threshold:
                self._blocked(blocked)

    def _blocked(self, blocked: float) -> None:
        frame = thread_frame(self.loop_thread)
        hook = running_hook(frame)
        with self._lock:
            if self._sent_at is None:  # the loop answered meanwhile
                return
            first = self._reported is None
            if first:
                # The first look names the stall. A later one may land after the block ended,
                # while the loop catches up on other work before answering the heartbeat.
                self._blamed = hook
                self._reported = hook.hook if hook is not None else code_position(frame)
        if first:
            if hook is not None:
                log_extension_failure(
                    hook.extension,
                    f"{hook.hook} is blocking the event loop ({blocked:.1f}s so far); every request waits",
                    level=logging.WARNING,
                )
            else:
                logger.warning("the event loop is blocked (%.1fs so far) in %s", blocked, code_position(frame))
        if hook is not None and hook.interrupt_after is not None and blocked >= hook.interrupt_after:
            self._request_interrupt(hook)

    def _request_interrupt(self, hook: RunningHook) -> None:
        if not self._can_interrupt:
            return
        with self._lock:
            self._interrupt = hook
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_kill(self.loop_thread, _INTERRUPT_SIGNAL)

    # -- on the loop -------------------------------------------------------------------------
    def _beat(self) -> None:
        with self._lock:
            sent, self._sent_at = self._sent_at, None
            blamed, reported = self._blamed, self._reported
            self._blamed = self._reported = None
            self._interrupt = None
        if reported is None or sent is None:
            return
        took = time.monotonic() - sent
        if blamed is not None:
            log_extension_failure(
                blamed.extension, f"{blamed.hook} blocked the event loop for {took:.1f}s", level=logging.WARNING
            )
        else:
            logger.warning("the event loop was blocked for %.1fs in %s", took, reported)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGUSR2 in the main thread: end the blocked service, if it is still the one running."""
        with self._lock:
            target = self._interrupt
        if target is None or running_hook(frame) != target:
            return  # stale, or the loop moved on: never raise into anything else
        with self._lock:
            self._interrupt = None
        raise HookBlocked(f"{target.hook} blocked the event loop past its {target.interrupt_after:.1f}s bound")
