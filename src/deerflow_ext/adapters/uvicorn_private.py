"""uvicorn's HTTP protocol class, given a deadline for each request's head.

uvicorn (0.55) arms its keep-alive timer only once a response completes, and cancels it on
the first byte that arrives. A connection that sends nothing, or sends its request head a
byte every few seconds (slowloris), is therefore held for ever: each costs a descriptor and
a protocol object, and enough of them use up the process's descriptors, after which it
accepts nothing at all. uvicorn has no setting for a head deadline.

:data:`HeadDeadlineProtocol` is uvicorn's own protocol class (``auto``: httptools when it is
installed, else h11) with one timer more. It is armed when the connection opens (the head is due within the
deadline) and again whenever a response completes (the connection may first idle for
uvicorn's keep-alive, whose own timer closes it then; the head is due within the deadline
after that); when it fires and no new request head has arrived since
(uvicorn starts a new ``cycle`` for each head it has parsed) and nothing is in flight, the
connection is closed. Requests in flight, streamed responses included, are never touched.
The deadline is process-wide (:func:`set_head_deadline`): ``serve`` sets it from
``DEERFLOW_HTTP_HEADER_TIMEOUT_SECONDS`` in each worker process, since a class travels to
uvicorn's worker processes by name.

Private: ``uvicorn.protocols.http.auto.AutoHTTPProtocol``, its ``connection_made``,
``on_response_complete`` and ``connection_lost``, and the ``cycle`` (with
``response_complete``), ``transport`` and ``timeout_keep_alive`` attributes.
Fallback: :data:`HeadDeadlineProtocol` is ``None`` and ``serve`` runs uvicorn's own class,
without a head deadline (keep-alive and every other timeout stay as configured).

:func:`run_workers` is uvicorn's supervisor for ``serve --workers N``, telling whether a
SIGINT stopped it. uvicorn's ``Multiprocess`` queues every signal it receives, handles it on
its own loop, and returns normally, so ``uvicorn.run`` gives the caller no way to know it was
Ctrl-C: ``serve`` exited 0 where README's exit-code table says 130 (one process reports it:
``uvicorn.Server`` raises the signal again once it has stopped). Private: the supervisor
handles SIGINT by calling its ``handle_int`` method (``handle_<signal name>``, from
``handle_signals``). Fallback: uvicorn's own ``Multiprocess``, and ``run_workers`` reports no
SIGINT (``serve --workers N`` exits 0 on Ctrl-C, as uvicorn does);
:data:`RECORDS_SIGINT` says which.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

__all__ = [
    "DEFAULT_HEAD_DEADLINE",
    "RECORDS_SIGINT",
    "HeadDeadlineProtocol",
    "head_deadline",
    "run_workers",
    "set_head_deadline",
    "supervisor",
]

DEFAULT_HEAD_DEADLINE = 10.0
_deadline = DEFAULT_HEAD_DEADLINE
_HOOKS = ("connection_made", "on_response_complete", "connection_lost")


def set_head_deadline(seconds: float) -> None:
    """Seconds a connection may take to send a complete request head (this process)."""
    global _deadline
    _deadline = float(seconds)


def head_deadline() -> float:
    return _deadline


def _auto_protocol() -> type[Any] | None:
    try:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol
    except ImportError:
        return None
    if not all(callable(getattr(AutoHTTPProtocol, hook, None)) for hook in _HOOKS):
        return None
    return AutoHTTPProtocol


def _make(base: type[Any]) -> type[Any]:
    class HeadDeadline(base):
        """uvicorn's protocol, closing a connection whose next request head is overdue."""

        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm_head_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_head_deadline(getattr(self, "timeout_keep_alive", 0.0))

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

        def _arm_head_deadline(self, idle: float = 0.0) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            waiting_after = getattr(self, "cycle", None)
            loop = asyncio.get_running_loop()
            self._head_timer = loop.call_later(idle + _deadline, self._head_overdue, waiting_after)

        def _head_overdue(self, waiting_after: Any) -> None:
            self._head_timer = None
            cycle = getattr(self, "cycle", None)
            if cycle is not waiting_after:  # a new head arrived meanwhile
                return
            if cycle is not None and not getattr(cycle, "response_complete", True):
                return
            transport = getattr(self, "transport", None)
            if transport is not None and not transport.is_closing():
                transport.close()

    HeadDeadline.__name__ = HeadDeadline.__qualname__ = "HeadDeadlineProtocol"
    return HeadDeadline


_base = _auto_protocol()
HeadDeadlineProtocol: type[Any] | None = None if _base is None else _make(_base)
"""The protocol class ``serve`` hands uvicorn (``http=``); None: uvicorn's own (fallback)."""


def _supervisor() -> type[Any] | None:
    from uvicorn.supervisors import Multiprocess

    if not callable(getattr(Multiprocess, "handle_int", None)):
        return None

    class SigintRecording(Multiprocess):
        """uvicorn's supervisor, remembering that SIGINT (not SIGTERM) is what stopped it."""

        interrupted = False

        def handle_int(self) -> None:
            self.interrupted = True
            super().handle_int()

    return SigintRecording


_supervisor_class = _supervisor()
RECORDS_SIGINT: bool = _supervisor_class is not None
"""Whether :func:`run_workers` can tell a SIGINT (False: the fallback, uvicorn's own supervisor)."""


def supervisor(config: Any, sockets: list[socket.socket]) -> Any:
    """uvicorn's ``Multiprocess`` for ``config``, with ``interrupted`` set by a SIGINT.

    Built, it has taken over the signals uvicorn handles (SIGINT, SIGTERM, SIGHUP, ...) in this
    process, as ``uvicorn.run`` does; ``run()`` serves until one stops it.
    """
    from uvicorn.supervisors import Multiprocess

    return (_supervisor_class or Multiprocess)(config, sockets=sockets)


def run_workers(config: Any, sock: socket.socket) -> bool:
    """Serve ``config.workers`` uvicorn worker processes on ``sock`` until a signal stops them.

    Returns True when it was SIGINT (always False in the fallback).
    """
    running = supervisor(config, [sock])
    running.run()
    return bool(getattr(running, "interrupted", False))
