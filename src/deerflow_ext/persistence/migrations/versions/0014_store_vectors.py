"""store vectors: the embeddings of store items, for the store's semantic search

Revision ID: 0014
Revises: 0009
Create Date: 2026-12-07

One row per embedded text of an item (``store.index.fields`` in config.yaml: one path may
name several texts), keyed by the item and the field it came from, and deleted with the item
(a cascade: a delete, a TTL sweep or a namespace's removal never leaves vectors behind). A
vector is stored unit-length, so its cosine with a unit query is a dot product: on SQLite a
float32 blob that ``sqlite-vec`` reads, on PostgreSQL a ``real[]`` that pgvector casts to its
``vector`` when the server has the extension, and a plain SQL scan multiplies otherwise. The
column has no fixed dimension: ``store.index.dims`` is the operator's and may change.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "store_vectors",
        sa.Column("prefix", sa.Text().with_variant(sa.Text(collation="C"), "postgresql"), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("field", sa.Text(), nullable=False),
        sa.Column(
            "embedding", sa.LargeBinary().with_variant(postgresql.ARRAY(sa.REAL()), "postgresql"), nullable=False
        ),
        sa.PrimaryKeyConstraint("prefix", "key", "field", name="pk_store_vectors"),
        sa.ForeignKeyConstraint(
            ["prefix", "key"],
            ["store_items.prefix", "store_items.key"],
            name="fk_store_vectors_item",
            ondelete="CASCADE",
        ),
    )


def downgrade() -> None:
    op.drop_table("store_vectors")
