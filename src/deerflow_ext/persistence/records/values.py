"""What the store hands out: frozen records of a thread and of a run.

Rows never leave the store: callers get these records, so a response can be built after
the connection is gone and nothing downstream can change a row by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row

from ...tokens import TokenUsage

__all__ = ["RunRecord", "ThreadNotFoundError", "ThreadRecord", "ThreadTTL"]


class ThreadNotFoundError(LookupError):
    """A run was asked for on a thread that does not exist (nothing was written)."""


@dataclass(frozen=True)
class ThreadTTL:
    """A thread's time to live (LangGraph's thread ``ttl``; ``deerflow_ext.expiry`` sweeps):
    ``strategy`` ``delete`` or ``keep_latest``, after ``minutes`` without activity."""

    strategy: str
    minutes: float

    def columns(self, now: datetime) -> dict[str, Any]:
        """The thread row's TTL columns, armed from ``now``."""
        return {
            "ttl_strategy": self.strategy,
            "ttl_minutes": float(self.minutes),
            "expires_at": now + timedelta(minutes=self.minutes),
        }


@dataclass(frozen=True)
class ThreadRecord:
    id: str
    title: str | None
    status: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, row: Row[Any]) -> ThreadRecord:
        """From a row of ``select(threads)`` (Core: its ``metadata`` column by name)."""
        return cls(row.id, row.title, row.status, row.created_at, row.updated_at, dict(row.metadata or {}))


@dataclass(frozen=True)
class RunRecord:
    id: str
    thread_id: str
    status: str
    outcome: str | None
    input: dict[str, Any]
    answer: str | None
    error: str | None
    tokens: TokenUsage
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    owner: str | None
    # The principal that asked for the run (``models.DEFAULT_USER_ID`` before there were users).
    user_id: str = "default"

    @classmethod
    def of(cls, row: Row[Any]) -> RunRecord:
        """From a row of ``select(runs)``."""
        return cls(
            row.id,
            row.thread_id,
            row.status,
            row.outcome,
            dict(row.input or {}),
            row.answer,
            row.error,
            TokenUsage.of(row),
            row.created_at,
            row.started_at,
            row.finished_at,
            row.owner,
            row.user_id,
        )
