"""webhook_outbox: deliveries owed by finished runs, written in the run's end transaction

Revision ID: 0012
Revises: 0009
Create Date: 2026-12-07

One row per webhook a run owes (``deerflow_ext.webhooks``); the worker's one query per wake
reads the earliest pending ``next_attempt_at``, and its claim selects due rows by the pair,
hence the index. No foreign key to ``runs``: a stateless run's thread goes when it ended.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_outbox",
        sa.Column("delivery_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("delivery_id", name="pk_webhook_outbox"),
    )
    op.create_index("ix_webhook_outbox_due", "webhook_outbox", ["status", "next_attempt_at"])
    op.create_index("ix_webhook_outbox_run_id", "webhook_outbox", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_outbox_run_id", table_name="webhook_outbox")
    op.drop_index("ix_webhook_outbox_due", table_name="webhook_outbox")
    op.drop_table("webhook_outbox")
