"""The run journal's table: what a run did, as extensions read it (``RunEvidenceReader``).

One row per event, numbered per thread (``seq`` 1, 2, 3... across the thread's runs, as
DeerFlow numbers its run events), so a reader pages one run's events with ``seq > after``.
A run's rows are written in one batch as it ends (``records.journal``), before its status
becomes terminal: a reader that sees a run ended finds all of its events. Like the other host
tables it sits on ``models.Base``'s metadata (migration 0011 creates it) and goes with its
thread.
"""

from __future__ import annotations

from sqlalchemy import JSON, Column, DateTime, ForeignKey, Index, Integer, String, Table

from .models import RUN_EVENTS_TABLE, Base

__all__ = ["RUN_EVENTS"]

RUN_EVENTS = Table(
    RUN_EVENTS_TABLE,
    Base.metadata,
    Column("thread_id", String(64), ForeignKey("threads.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("run_id", String(64), nullable=False),
    Column("event_type", String(64), nullable=False),
    Column("category", String(32), nullable=False),
    Column("content", JSON, nullable=True),
    Column("metadata", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_run_events_run_id_seq", "run_id", "seq"),
)
