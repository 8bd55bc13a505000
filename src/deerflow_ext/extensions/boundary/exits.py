"""``KeyboardInterrupt`` and ``SystemExit`` from extension code: the extension's failure.

The spec's notification rule lets both propagate (docs/SPEC.md, "Notifications and
fail-open": "KeyboardInterrupt and SystemExit always propagate"), and the remaining
contributors of that notification are not called. That rule is kept exactly, inside the
helper. What the spec does not say is what the *Gateway* does next, and a Gateway that lets
them travel on has no good answer: asyncio re-raises them out of the event loop from
whichever task they reach, so one ``sys.exit()`` in a hook used to end the process within
seconds, with no ordered shutdown, the run left ``running`` and the buffers of every other
extension lost.

The decision, applied at each boundary where the host calls extension code:

* **They are the extension's failure.** Raised by ``install()``, a middleware, a
  ``contribute_middlewares``, an assembly observer, a service's ``start``/``stop`` or a
  contributed route, each is handled there exactly like an ``Exception`` from the same code:
  attributed (the log names the extension), contained, fail-open.
* **Notifications keep the spec's rule.** :func:`~.notify.deliver` lets them propagate,
  after :func:`attribute_exit` records which contributor and hook raised them, and the
  remaining contributors of that notification are not called. The boundary that started the
  notification — the run worker, the subagent executor, system-model observation, the
  fire-and-forget and cross-loop dispatch of the notification loop — then contains it with
  :func:`contain_exit`: one attributed log line, and the run carries on (lifecycle hooks and
  observers fail open; they cannot change what the host does).
* **Nothing reaches the event loop.** A run task or a subagent that still sees one (from a
  contributed tool, say, which the host does not wrap) ends ``failed``, persisted, with the
  exception logged; the Gateway keeps serving.
* **A real Ctrl-C still stops the process.** While the Gateway serves, uvicorn owns SIGINT and
  SIGTERM: its handler sets ``should_exit`` and never raises into a task, so a
  ``KeyboardInterrupt`` seen inside the Gateway was raised by code, and the ordered shutdown
  runs as before. Loading is different: it runs synchronously before uvicorn starts, so an
  operator's Ctrl-C can land inside an ``install()``. :class:`InterruptWatch` tells that one
  apart (the signal handler saw it) and lets it propagate; a ``KeyboardInterrupt`` the
  extension raised itself is a load failure, and ``required`` decides.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from deerflow_ext.exception_text import exception_text

from .diagnostics import log_extension_failure

__all__ = [
    "EXTENSION_FAILURES",
    "PROCESS_EXITS",
    "ExitOrigin",
    "InterruptWatch",
    "attribute_exit",
    "contain_exit",
    "exit_origin",
]

logger = logging.getLogger("deerflow_ext.extensions")

PROCESS_EXITS: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit)
"""The two exceptions that end a Python process when nothing stops them."""

EXTENSION_FAILURES: tuple[type[BaseException], ...] = (Exception, asyncio.CancelledError, *PROCESS_EXITS)
"""What a boundary that calls extension code directly catches as the extension's failure.

A ``CancelledError`` among them is then judged by its origin (``origin.is_host_cancellation``):
the host's own cancellation still propagates.
"""

_ORIGIN_ATTRIBUTE = "__deerflow_exit_origin__"


@dataclass(frozen=True)
class ExitOrigin:
    """Who raised a process exit: the extension's attribution and the hook it was in."""

    extension: str
    hook: str


def attribute_exit(exc: BaseException, extension: str, hook: str) -> None:
    """Record on ``exc`` that ``extension`` raised it from ``hook`` (the first record wins).

    The exception object itself carries the attribution because it must propagate unchanged
    (docs/SPEC.md) to a boundary that no longer knows which contributor was running.
    """
    if exit_origin(exc) is None:
        try:
            setattr(exc, _ORIGIN_ATTRIBUTE, ExitOrigin(extension, hook))
        except AttributeError:  # an exception class with slots and no __dict__: unattributed
            pass


def exit_origin(exc: BaseException) -> ExitOrigin | None:
    """The :class:`ExitOrigin` recorded by :func:`attribute_exit`, if any."""
    origin = getattr(exc, _ORIGIN_ATTRIBUTE, None)
    return origin if isinstance(origin, ExitOrigin) else None


def contain_exit(exc: BaseException, *, where: str) -> str:
    """Log a contained process exit, attributed when its extension is known; returns the text.

    ``where`` names the host boundary that stopped it ("run <id>", "subagent <id>"), for the
    unattributed case and for the reader of the log.
    """
    origin = exit_origin(exc)
    if origin is not None:
        text = f"{origin.hook} raised {exception_text(exc)}"
        log_extension_failure(
            origin.extension, f"{text} in {where}; contained: an extension cannot stop the Gateway", exc=exc
        )
        return f"extension {origin.extension}: {text}"
    text = exception_text(exc)
    logger.error("%s raised %s outside any extension hook; contained", where, text, exc_info=exc)
    return text


class InterruptWatch:
    """Tells an operator's Ctrl-C from a ``KeyboardInterrupt`` that code raised.

    Used as a context manager around synchronous work that runs extension code in the main
    thread before uvicorn owns the signals (loading). While active, SIGINT goes through a
    handler that records the delivery and then does what the previous handler did (by
    default: raise ``KeyboardInterrupt``). Outside the main thread no signal can raise there,
    so nothing is installed and :attr:`delivered` stays false.
    """

    def __init__(self) -> None:
        self.delivered = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> InterruptWatch:
        if threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):  # SIG_IGN / SIG_DFL / unknown: no KeyboardInterrupt comes from it
            return self
        self._previous = previous
        signal.signal(signal.SIGINT, self._handle)
        self._installed = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def sent(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the operator's Ctrl-C rather than something code raised."""
        return self.delivered and isinstance(exc, KeyboardInterrupt)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.delivered = True
        handler: Callable[[int, FrameType | None], Any] = self._previous
        handler(signum, frame)
