"""crons: scheduled runs, each row claimed by advancing next_run_date

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07

One row per cron (``deerflow_ext.scheduling``); ``next_run_date`` is indexed because the
scheduler's one query per wake is the earliest of it, and its claim selects the due rows by it.
A thread's crons go with the thread.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "crons",
        sa.Column("cron_id", sa.String(64), nullable=False),
        sa.Column("assistant_id", sa.String(64), nullable=False),
        sa.Column("thread_id", sa.String(64), nullable=True),
        sa.Column("on_run_completed", sa.String(8), nullable=True),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("schedule", sa.Text(), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=True),
        sa.Column("next_run_date", sa.DateTime(timezone=True), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], name="fk_crons_thread_id_threads", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("cron_id", name="pk_crons"),
    )
    op.create_index("ix_crons_next_run_date", "crons", ["next_run_date"])
    op.create_index("ix_crons_thread_id", "crons", ["thread_id"])


def downgrade() -> None:
    op.drop_index("ix_crons_thread_id", table_name="crons")
    op.drop_index("ix_crons_next_run_date", table_name="crons")
    op.drop_table("crons")
