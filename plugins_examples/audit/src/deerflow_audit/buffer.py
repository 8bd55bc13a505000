"""The hand-off between lifecycle hooks (no I/O allowed) and the writer service.

A hook may run on the Gateway loop or be driven from a subagent's thread, so the buffer
is a plain lock-protected deque rather than an ``asyncio.Queue`` bound to one loop; the
writer is woken thread-safely through the loop it registered.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from threading import Lock

__all__ = ["AuditBuffer", "OutcomeRecord"]


@dataclass(frozen=True, slots=True)
class OutcomeRecord:
    """One task outcome as it will be written: a row of ``audit_task_outcomes``."""

    task_id: str
    run_id: str
    thread_id: str | None
    kind: str
    outcome: str
    recorded_at: datetime

    def as_row(self) -> dict[str, object]:
        return {
            "task_id": self.task_id,
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "kind": self.kind,
            "outcome": self.outcome,
            "recorded_at": self.recorded_at,
        }


@dataclass
class AuditBuffer:
    """Pending outcomes, kept in the app store so hooks and the service share one buffer.

    It is unbounded on purpose: an audit trail that drops records under load is worse
    than one that uses memory until the writer catches up.
    """

    _pending: deque[OutcomeRecord] = field(default_factory=deque)
    _lock: Lock = field(default_factory=Lock, repr=False)
    _wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = field(default=None, repr=False)

    def put(self, record: OutcomeRecord) -> None:
        """Append *record* and wake the writer; never blocks on I/O."""
        with self._lock:
            self._pending.append(record)
            wake = self._wake
        if wake is not None:
            loop, event = wake
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the writer's loop is closed; stop() drains what is left
                pass

    def drain(self) -> list[OutcomeRecord]:
        """Take every pending record, oldest first."""
        with self._lock:
            records = list(self._pending)
            self._pending.clear()
            return records

    def requeue(self, records: list[OutcomeRecord]) -> None:
        """Put records back at the front after a failed write, keeping their order."""
        with self._lock:
            self._pending.extendleft(reversed(records))

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def attach(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        with self._lock:
            self._wake = (loop, event)

    def detach(self) -> None:
        with self._lock:
            self._wake = None
