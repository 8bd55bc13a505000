"""runs.user_id and run_events: whose run it is, and what it did, for run evidence readers

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-07

``runs.user_id`` is the principal that asked for the run (``"default"``, the Gateway's one
principal, for every run recorded before it). ``run_events`` is the run journal extensions
read (``deerflow_extension_api.RunEvidenceReader``): a run's start, its messages and its end,
numbered per thread (``seq``), written in one batch as the run ends. Both go with the thread.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("user_id", sa.String(255), nullable=False, server_default="default"))
    op.create_table(
        "run_events",
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("category", sa.String(32), nullable=False),
        sa.Column("content", sa.JSON(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["threads.id"], name="fk_run_events_thread_id_threads", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("thread_id", "seq", name="pk_run_events"),
    )
    op.create_index("ix_run_events_run_id_seq", "run_events", ["run_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_run_events_run_id_seq", table_name="run_events")
    op.drop_table("run_events")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("user_id")
