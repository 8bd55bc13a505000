"""thread ttl: a thread's time to live, strategy and next expiry

Revision ID: 0013
Revises: 0009
Create Date: 2026-12-07

LangGraph's thread ``ttl`` (``deerflow_ext.expiry``): ``ttl_strategy`` (``delete`` or
``keep_latest``), ``ttl_minutes`` (the inactivity it allows) and ``expires_at`` (when the
sweep looks at the thread next). The index holds only threads with a time to live, so a
deployment that sets none pays nothing for it, and the sweep's one query reads it in order.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_EXPIRING = sa.text("expires_at IS NOT NULL")


def upgrade() -> None:
    op.add_column("threads", sa.Column("ttl_strategy", sa.String(16), nullable=True))
    op.add_column("threads", sa.Column("ttl_minutes", sa.Float(), nullable=True))
    op.add_column("threads", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_threads_expires_at",
        "threads",
        ["expires_at"],
        postgresql_where=_EXPIRING,
        sqlite_where=_EXPIRING,
    )


def downgrade() -> None:
    op.drop_index("ix_threads_expires_at", table_name="threads")
    op.drop_column("threads", "expires_at")
    op.drop_column("threads", "ttl_minutes")
    op.drop_column("threads", "ttl_strategy")
