"""The webhook outbox: one row per delivery a finished run owes (``deerflow_ext.webhooks``
reads and writes it).

A row is written by the run's end, in the same transaction that records the run's final
status (``records.HostStore.finish_run``), so a run that is recorded as ended always has its
delivery owed, and one that is not has none: no window where a crash loses a webhook or sends
one for a run the database does not know ended. ``delivery_id`` is the idempotency key the
receiver sees (``webhook-id``); ``payload`` is LangGraph's webhook body as of the run's end
(``webhook_sent_at`` is added at each attempt).

``status`` is ``pending`` until a 2xx answer (``delivered``) or the last allowed attempt
(``failed``). ``next_attempt_at`` is when a pending row is next due: a worker claiming a row
moves it forward by a lease (another process skips it meanwhile), and a failed attempt to
the backoff's next date. The index on the pair is what the worker's one query per wake reads;
the one on ``status`` and ``updated_at`` is what the pruning of settled rows reads (migration
0015), so that an hourly prune does not scan the days of rows it keeps.

No foreign key to ``runs``: a stateless run's thread (and so its run) is deleted as soon as
the run ended, before its webhook is delivered. Migration 0012 creates the table.
"""

from __future__ import annotations

from sqlalchemy import JSON, Column, DateTime, Index, Integer, String, Table, Text

from .models import WEBHOOK_TABLE, Base

__all__ = ["WEBHOOK_OUTBOX"]

WEBHOOK_OUTBOX = Table(
    WEBHOOK_TABLE,
    Base.metadata,
    Column("delivery_id", String(64), primary_key=True),
    Column("run_id", String(64), nullable=False),
    Column("thread_id", String(64), nullable=False),
    Column("url", Text, nullable=False),
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("last_status_code", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Index("ix_webhook_outbox_due", "status", "next_attempt_at"),
    Index("ix_webhook_outbox_run_id", "run_id"),
    Index("ix_webhook_outbox_settled", "status", "updated_at"),
)
