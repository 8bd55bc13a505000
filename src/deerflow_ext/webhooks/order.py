"""What a run with a ``webhook`` carries to its end, and the outbox row its end writes.

The Gateway builds a :class:`WebhookOrder` when it accepts the run (the URL already checked
by the policy; the run's request fields LangGraph's payload repeats), and the run's worker
turns it into the outbox row at the run's end (:meth:`WebhookOrder.outbox_row`), which the
host store writes in the same transaction as the run's final status. A run without a
webhook carries ``None`` and pays nothing.

The payload is LangGraph's: the run (``run_id``, ``thread_id``, ``assistant_id``,
``created_at``, ``updated_at``, ``status``, ``metadata``, ``kwargs``,
``multitask_strategy``), ``run_started_at``, ``run_ended_at``, the thread's ``values`` at the
end and ``error`` (``{"error": type, "message": text}`` for a failed run, else null); the
delivery adds ``webhook_sent_at`` to each attempt.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["PENDING", "WebhookOrder"]

PENDING = "pending"


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()


def _error(status: str, error: str | None) -> dict[str, str] | None:
    if status != "error" or not error:
        return None
    name, sep, message = error.partition(": ")
    return {"error": name, "message": message} if sep else {"error": "Error", "message": error}


@dataclass(frozen=True)
class WebhookOrder:
    url: str
    assistant_id: str
    metadata: Mapping[str, Any]
    kwargs: Mapping[str, Any]
    multitask_strategy: str
    wake: Callable[[], None] = field(default=lambda: None, compare=False, repr=False)
    """Tells this process's delivery worker a row was written (after the commit)."""

    def outbox_row(
        self,
        *,
        run_id: str,
        thread_id: str,
        status: str,
        created_at: datetime | None,
        started_at: datetime | None,
        error: str | None,
        values: Any,
    ) -> dict[str, Any]:
        now = datetime.now(UTC)
        ended = _iso(now)
        payload = {
            "run_id": run_id,
            "thread_id": thread_id,
            "assistant_id": self.assistant_id,
            "created_at": _iso(created_at) or ended,
            "updated_at": ended,
            "status": status,
            "metadata": dict(self.metadata),
            "kwargs": dict(self.kwargs),
            "multitask_strategy": self.multitask_strategy,
            "run_started_at": _iso(started_at),
            "run_ended_at": ended,
            "values": values,
            "error": _error(status, error),
        }
        return {
            "delivery_id": str(uuid.uuid4()),
            "run_id": run_id,
            "thread_id": thread_id,
            "url": self.url,
            "payload": payload,
            "status": PENDING,
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
            "updated_at": now,
            "last_status_code": None,
            "last_error": None,
        }
