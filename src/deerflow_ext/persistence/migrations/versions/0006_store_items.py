"""store items: the LangGraph Platform store's items, one row per namespace and key

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06

A namespace is kept as its labels joined with dots (a label may not contain one), so that
"every item under this prefix" is an equality or a range (``>= 'a.b.'`` and ``< 'a.b/'``) on
the leading column of the primary key. A range means a prefix only in bytewise order:
SQLite's, and PostgreSQL's under the "C" collation, which the column takes there. An item
with a time to live carries its ``expires_at`` and the minutes it was given, so that a read
can push the deadline forward by as much again; only such items are in the expiry index, so
a write without one maintains a single index.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EXPIRING = sa.text("expires_at IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "store_items",
        sa.Column("prefix", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl_minutes", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("prefix", "key", name="pk_store_items"),
    )
    op.create_index(
        "ix_store_items_expires_at", "store_items", ["expires_at"], postgresql_where=EXPIRING, sqlite_where=EXPIRING
    )


def downgrade() -> None:
    op.drop_index("ix_store_items_expires_at", table_name="store_items")
    op.drop_table("store_items")
