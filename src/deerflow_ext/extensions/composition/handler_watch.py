"""What a contributed wrap hook did with its handler, as the host sees it.

The isolation rule "observe, never decide" (docs/SPEC.md, "Runtime slice": isolation of
contributed middleware; ``isolation.py``) needs the wrap hook's handler to be the host's:
for an observing extension it always runs the host's *original* request, runs at most once,
and records what it returned or raised, so the wrapper can settle the call afterwards
without a second downstream call, and tell a downstream failure from the extension's own.
:class:`HandlerWatch` is that handler, one per wrap-hook call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..boundary.loopwatch import DOWNSTREAM, RunningHook, register_site

__all__ = ["NOT_RUN", "HandlerWatch", "RepeatedHandlerCall"]

#: ``HandlerWatch.result`` before the handler has returned.
NOT_RUN: Any = object()

_perf_counter = time.perf_counter


class RepeatedHandlerCall(RuntimeError):
    """Raised into an observe-only wrap hook that calls its handler a second time."""


class HandlerWatch:
    """One wrap-hook call, as the host sees it: the request it made and what the handler did.

    ``call``/``acall`` is the handler the extension gets. For an observing extension it always
    runs the host's request (``rewritten`` notes that the extension passed another one) and
    runs at most once (a repeat raises :class:`RepeatedHandlerCall` and is only counted); for
    a deciding one (``intercept: true``) it runs what the extension asks, as often as it
    asks. Either way it records the handler's result or exception, so the wrapper can settle
    the call without a second downstream call and tell a downstream failure from the
    extension's own. Per call and on the hot path of every model and tool call, hence
    ``__slots__`` and bound methods instead of a closure per call. ``seconds`` is the time
    spent downstream, which the metrics subtract so a wrap hook is charged for its own work.
    """

    __slots__ = ("calls", "deciding", "error", "handler", "repeat", "request", "result", "rewritten", "seconds")

    def __init__(self, request: Any, handler: Callable[[Any], Any], deciding: bool) -> None:
        self.request = request
        self.handler = handler
        self.deciding = deciding
        self.calls = 0
        self.result: Any = NOT_RUN
        self.error: BaseException | None = None
        self.repeat: RepeatedHandlerCall | None = None
        self.rewritten = False
        self.seconds = 0.0

    def _enter(self, request: Any) -> Any:
        """The request the handler runs (the first call with the host's request, the path of
        nearly every call, is decided first)."""
        if request is self.request and not self.calls:
            self.calls = 1
            return request
        self.calls += 1
        if self.deciding:
            return request
        if request is not self.request:
            self.rewritten = True
        if self.calls > 1:
            self.repeat = RepeatedHandlerCall("an observing middleware may call its handler once")
            raise self.repeat
        return self.request

    def _failed(self, exc: BaseException, started: float) -> None:
        self.error = exc
        self.seconds += _perf_counter() - started

    # Timing and the handler's failure are kept alike on both paths (calls never overlap: a
    # repeat is refused in _enter before it runs), with no context manager: two method calls
    # fewer per member on every model and tool call.
    def call(self, request: Any) -> Any:
        run = self._enter(request)
        started = _perf_counter()
        try:
            self.result = self.handler(run)
        except BaseException as exc:
            self._failed(exc, started)
            raise
        self.seconds += _perf_counter() - started
        return self.result

    async def acall(self, request: Any) -> Any:
        run = self._enter(request)
        started = _perf_counter()
        try:
            self.result = await self.handler(run)
        except BaseException as exc:
            self._failed(exc, started)
            raise
        self.seconds += _perf_counter() - started
        return self.result


def _downstream(frame: Any) -> RunningHook:
    return DOWNSTREAM  # the frames inside a tracked handler are the downstream call's


register_site(HandlerWatch.call, _downstream)
register_site(HandlerWatch.acall, _downstream)
