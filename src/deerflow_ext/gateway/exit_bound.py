"""Shutdown ends within its bound, whatever extensions left running.

Two things used to keep a stopped Gateway alive for good: a *non-daemon thread*
an extension started (Python's interpreter shutdown joins every one of them, forever), and a
service whose ``stop()`` blocks the event loop in a call nothing can interrupt. Neither can
be fixed from inside the loop, so ``deerflow-ext serve`` arms an :class:`ExitBound` when the
ordered shutdown starts: a daemon thread (it never holds the process up itself) with a
deadline of

    drain grace + notification drain + every service's stop timeout + exit grace

(30 + 5 + 10 per service + 5 seconds by default; the HTTP graceful period,
``DEERFLOW_GRACEFUL_SHUTDOWN_SECONDS``, comes before it). When the ordered shutdown has
finished, the remaining time shrinks to the exit grace. If the process is still alive at the
deadline, the thread logs what holds it — the threads still running, each with the code it
is in, and the extension hook blocking the loop, if any — flushes the log and ends the
process with ``os._exit``: exit code 0 when the ordered shutdown had completed (only
leftovers were abandoned), 1 when it had not.

It is armed only by ``serve`` (``GatewayOptions.exit_bound``): an embedder or a test suite
running ``create_app`` in its own process keeps its process to itself.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from ..extensions.boundary.loopwatch import code_position, running_hook, thread_frame

__all__ = ["DEFAULT_EXIT_GRACE", "ExitBound"]

logger = logging.getLogger("deerflow_ext.gateway")

DEFAULT_EXIT_GRACE = 5.0
"""Seconds threads left running get, once the ordered shutdown is done, before the process exits."""

_POLL = 0.05


class ExitBound:
    """Ends the process at a deadline if shutdown has not let it end by itself."""

    def __init__(self, shutdown_seconds: float, *, grace: float = DEFAULT_EXIT_GRACE) -> None:
        self.grace = grace
        self._deadline = time.monotonic() + shutdown_seconds + grace
        self._finished = False
        self._lock = threading.Lock()
        self._loop_thread = threading.get_ident()
        self._thread = threading.Thread(target=self._enforce, name="deerflow-exit-bound", daemon=True)

    def arm(self) -> ExitBound:
        self._thread.start()
        return self

    def shutdown_finished(self) -> None:
        """The ordered shutdown is done: only the exit grace is left."""
        with self._lock:
            self._finished = True
            self._deadline = min(self._deadline, time.monotonic() + self.grace)

    def _enforce(self) -> None:
        while True:
            with self._lock:
                deadline, finished = self._deadline, self._finished
            if time.monotonic() >= deadline:
                break
            if finished and not _lingering():
                return  # the interpreter exits by itself now
            time.sleep(_POLL)
        self._exit(finished)

    def _exit(self, finished: bool) -> None:
        lingering = [f"{t.name} in {_position(t.ident)}" for t in _lingering()]
        if not finished:
            hook = running_hook(thread_frame(self._loop_thread))
            blocker = f"Extension {hook.extension}: {hook.hook}" if hook else _position(self._loop_thread)
            logger.error("shutdown did not finish within its bound; the event loop is in %s", blocker)
        if lingering:
            logger.error(
                "%d thread(s) still running after shutdown; extensions must stop the threads they start: %s",
                len(lingering),
                "; ".join(lingering),
            )
        logger.error("exiting without waiting any longer")
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:
                continue
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                continue
        os._exit(0 if finished else 1)


def _lingering() -> list[threading.Thread]:
    """Alive non-daemon threads other than the main thread: what interpreter shutdown waits for."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def _position(thread_id: int | None) -> str:
    return code_position(thread_frame(thread_id) if thread_id is not None else None)
