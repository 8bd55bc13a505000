"""live runs by thread: the runs of a thread that are pending or running, indexed alone

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04

A PostgreSQL hold looks for what the last holder left running on its thread in the statement
that takes the lock (``runtime.pg_coordinator``), on every run. Through ``ix_runs_status``
that read walked every entry ever made for ``running`` (each run passes through it, and a
status change leaves its old entry until VACUUM): 0.5 ms of the server's CPU a take on a
database of 12,000 runs, twice what the lease row it replaced cost. This index holds only a
thread's live runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LIVE = sa.text("status IN ('pending', 'running')")


def upgrade() -> None:
    op.create_index("ix_runs_live_thread_id", "runs", ["thread_id"], postgresql_where=LIVE, sqlite_where=LIVE)


def downgrade() -> None:
    op.drop_index("ix_runs_live_thread_id", table_name="runs")
