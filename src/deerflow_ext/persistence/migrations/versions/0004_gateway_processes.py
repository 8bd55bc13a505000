"""gateway processes: one heartbeat row per Gateway process (scale-out)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gateway_processes",
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("owner", name="pk_gateway_processes"),
    )
    op.create_index("ix_gateway_processes_expires_at", "gateway_processes", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_gateway_processes_expires_at", table_name="gateway_processes")
    op.drop_table("gateway_processes")
