"""Attributed diagnostics: every problem an extension causes names that extension.

Operators read the Gateway log, so the log line is the primary output; the bounded live list
on ``app.state.extension_diagnostics`` exists for tests, ``doctor`` and the author kit.

There is no process-wide list: each ``LoadedExtensions`` snapshot carries the list its
loading started (``LoadedExtensions.diagnostics``, the one ``create_app`` puts on
``app.state``), and everything that records a problem of those extensions — loading,
middleware composition and isolation, services, routers — is handed that list. Two Gateway
apps in one process therefore never see each other's diagnostics.

Lifecycle-hook and observer failures are logged with the same prefix but deliberately kept
out of the list (spec: "logged but not added to that list") — they happen per run and would
push the load-time diagnostics an operator needs out of the window.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType

__all__ = [
    "DIAGNOSTICS_LIMIT",
    "Diagnostic",
    "DiagnosticsList",
    "log_extension_failure",
    "logger",
]

DIAGNOSTICS_LIMIT = 1000

logger = logging.getLogger("deerflow_ext.extensions")


@dataclass(frozen=True)
class Diagnostic:
    """One problem attributed to one extension (``extension`` is its resolved ``module:attr``)."""

    extension: str
    phase: str
    message: str
    error_type: str | None = None
    at: float = field(default_factory=time.time)

    def __str__(self) -> str:
        return f"Extension {self.extension}: {self.message}"


class DiagnosticsList:
    """A thread-safe, bounded, append-only view of the most recent diagnostics."""

    def __init__(self, limit: int = DIAGNOSTICS_LIMIT) -> None:
        self._items: deque[Diagnostic] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def record(
        self,
        extension: str,
        phase: str,
        message: str,
        *,
        exc: BaseException | None = None,
        level: int = logging.ERROR,
    ) -> Diagnostic:
        diagnostic = Diagnostic(extension, phase, message, type(exc).__name__ if exc is not None else None)
        logger.log(level, "%s", diagnostic, exc_info=_exc_info(exc), extra={"extension": extension, "phase": phase})
        with self._lock:
            self._items.append(diagnostic)
        return diagnostic

    def snapshot(self) -> tuple[Diagnostic, ...]:
        with self._lock:
            return tuple(self._items)

    def for_extension(self, extension: str) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.snapshot() if d.extension == extension)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __repr__(self) -> str:
        return f"DiagnosticsList({len(self)} of {self._items.maxlen})"


def _exc_info(exc: BaseException | None) -> tuple[type[BaseException], BaseException, TracebackType | None] | None:
    # Tracebacks go to DEBUG-enabled logs only: the message line already names the extension
    # and the error; a full traceback per failing run would drown the operator's log.
    if exc is None or not logger.isEnabledFor(logging.DEBUG):
        return None
    return (type(exc), exc, exc.__traceback__)


def log_extension_failure(
    extension: str, message: str, *, exc: BaseException | None = None, level: int = logging.ERROR
) -> None:
    """Log a failure attributed to ``extension`` without adding it to the live list."""
    logger.log(level, "Extension %s: %s", extension, message, exc_info=_exc_info(exc), extra={"extension": extension})
