"""The crons' table: one row per scheduled run (``deerflow_ext.scheduling`` reads and writes it).

A row is what LangGraph Platform's ``Cron`` shows (schedule, time zone, end, the run's
payload, metadata, ``on_run_completed``, enabled) plus ``next_run_date``: the next tick the
row is due at, in UTC. The scheduler claims due rows by advancing that column in the same
transaction that selected them (``FOR UPDATE SKIP LOCKED`` on PostgreSQL), which is what makes
one tick fire once across processes; NULL means the cron will not fire again (past its
``end_time``). The index on it is what the scheduler's one query per wake reads.

A thread's cron goes with its thread (``ON DELETE CASCADE``); a stateless cron has no thread.
Like the other host tables it sits on ``models.Base``'s metadata and is registered by the
package's ``__init__`` (migration 0009 creates it).
"""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Column, DateTime, ForeignKey, Index, String, Table, Text

from .models import CRON_TABLE, Base

__all__ = ["CRONS", "CRON_COLUMNS"]

CRONS = Table(
    CRON_TABLE,
    Base.metadata,
    Column("cron_id", String(64), primary_key=True),
    Column("assistant_id", String(64), nullable=False),
    Column("thread_id", String(64), ForeignKey("threads.id", ondelete="CASCADE"), nullable=True),
    Column("on_run_completed", String(8), nullable=True),
    Column("end_time", DateTime(timezone=True), nullable=True),
    Column("schedule", Text, nullable=False),
    Column("timezone", String(64), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("user_id", String(255), nullable=True),
    Column("next_run_date", DateTime(timezone=True), nullable=True),
    Column("metadata", JSON, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Index("ix_crons_next_run_date", "next_run_date"),
    Index("ix_crons_thread_id", "thread_id"),
)

CRON_COLUMNS: tuple[str, ...] = tuple(CRONS.c.keys())
"""A cron's fields, in the order LangGraph's responses list them."""
