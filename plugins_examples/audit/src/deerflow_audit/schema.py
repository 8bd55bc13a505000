"""The audit tables, under this package's own ``MetaData``.

Keeping a separate ``MetaData`` (not the host's) is what lets the host and this package
each run ``compare_metadata`` against the same database without either seeing the
other's tables as "extra, drop them". Every table name starts with :data:`TABLE_PREFIX`,
which the operator declares as the entry's ``table_prefix`` so the host excludes them.
"""

from __future__ import annotations

from sqlalchemy import Column, DateTime, Index, Integer, MetaData, String, Table

__all__ = ["TABLE_PREFIX", "metadata", "task_outcomes"]

TABLE_PREFIX = "audit_"

metadata = MetaData()

task_outcomes = Table(
    f"{TABLE_PREFIX}task_outcomes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("task_id", String(128), nullable=False),
    Column("run_id", String(128), nullable=False),
    Column("thread_id", String(128), nullable=True),
    Column("kind", String(16), nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Index(f"ix_{TABLE_PREFIX}task_outcomes_run_id", "run_id"),
)
