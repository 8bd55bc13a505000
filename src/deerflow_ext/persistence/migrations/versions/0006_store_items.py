"""store items: the LangGraph Platform store's items, one row per namespace and key

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06

A namespace is kept as its labels joined with dots (a label may not contain one), so that
"every item under this prefix" is an equality or a ``LIKE 'a.b.%'`` on one indexed column.
On PostgreSQL that second form needs an index built with ``text_pattern_ops`` (a btree in a
non-C collation cannot serve ``LIKE``); on SQLite the same index is a plain one. An item with
a time to live carries its ``expires_at`` and the minutes it was given, so that a read can
push the deadline forward by as much again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "store_items",
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl_minutes", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("prefix", "key", name="pk_store_items"),
    )
    op.create_index(
        "ix_store_items_prefix_pattern",
        "store_items",
        ["prefix"],
        postgresql_ops={"prefix": "text_pattern_ops"},
    )
    op.create_index("ix_store_items_expires_at", "store_items", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_store_items_expires_at", table_name="store_items")
    op.drop_index("ix_store_items_prefix_pattern", table_name="store_items")
    op.drop_table("store_items")
