"""thread leases: cross-process thread holds with expiry (scale-out)

Revision ID: 0002
Revises: 0001
Create Date: 2025-02-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "thread_leases",
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("backend_pid", sa.Integer(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", name="pk_thread_leases"),
    )
    op.create_index("ix_thread_leases_expires_at", "thread_leases", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_thread_leases_expires_at", table_name="thread_leases")
    op.drop_table("thread_leases")
