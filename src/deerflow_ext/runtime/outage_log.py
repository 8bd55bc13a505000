"""Log lines of a failing dependency, bounded: per outage and per minute, never per call.

A Redis that fails fails every reader, heartbeat, run and batch at once; logging each
failure flooded the log (issue 54: 4,206 warnings in one load test), and logging each
outage still did when Redis flapped (a failure, a success, a failure...). An
:class:`OutageLog` writes the first failure of an outage and, once calls succeed again, one
line saying so, and at most one such pair per ``interval``: failures and recoveries in
between are counted and the count goes with the next line written.
"""

from __future__ import annotations

import logging
import time

__all__ = ["OutageLog"]


class OutageLog:
    """One dependency's failures, e.g. ``OutageLog(logger, "run streams: Redis read")``."""

    def __init__(self, logger: logging.Logger, what: str, *, interval: float = 60.0) -> None:
        self._logger = logger
        self._what = what
        self._interval = interval
        self._failing = False
        self._last_line = -interval
        self._unlogged = 0  # outages since the last line

    @property
    def failing(self) -> bool:
        return self._failing

    def failed(self, exc: BaseException, consequence: str) -> None:
        """A call failed: one line if this starts an outage and none was written lately."""
        if self._failing:
            return
        self._failing = True
        now = time.monotonic()
        if now - self._last_line < self._interval:
            self._unlogged += 1
            return
        self._last_line = now
        more = f" ({self._unlogged} more outage(s) since the last line)" if self._unlogged else ""
        self._unlogged = 0
        self._logger.warning("%s failed (%s: %s); %s%s", self._what, type(exc).__name__, exc, consequence, more)

    def recovered(self, detail: str = "") -> bool:
        """A call succeeded: one line if it ends an outage whose start was written (True)."""
        if not self._failing:
            return False
        self._failing = False
        if self._unlogged:
            return False  # its start was not written either; counted with the next line
        self._logger.warning("%s succeeds again%s", self._what, f" ({detail})" if detail else "")
        return True
