"""The ``store_items`` table: the LangGraph Platform store's items (migration 0006).

A namespace is stored as its labels joined with dots in ``prefix`` (a label may not contain
a dot: ``item_matching``), so "every item under a namespace prefix" is an equality or a
range (``>= 'a.b.'`` and ``< 'a.b/'``) on the primary key's leading column rather than a
scan of every row. A range is a prefix only in bytewise order: SQLite's, and PostgreSQL's
under the "C" collation, which the column takes there (so no second index is needed, and a
write maintains the primary key alone).

An item with a time to live keeps ``expires_at`` and the minutes it was given
(``ttl_minutes``), so a read that refreshes it can push the deadline forward by as much again;
the expiry index holds only such items.

The table sits on the host's ``MetaData`` (``models.Base``) so that alembic autogenerate
compares it with the migrations; the package imports this module, so the table is there
whenever the host's metadata is.

``store_vectors`` (migration 0014) holds the embeddings semantic search ranks by: one row per
embedded text of an item, unit-length (cosine = dot product), a float32 blob on SQLite (what
``sqlite-vec`` reads) and ``real[]`` on PostgreSQL (what pgvector casts to ``vector``),
deleted with its item by the foreign key's cascade.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    REAL,
    Column,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Index,
    LargeBinary,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects import postgresql

from .models import STORE_TABLE, STORE_VECTORS_TABLE, Base

__all__ = ["STORE_ITEMS", "STORE_VECTORS"]

_EXPIRING = text("expires_at IS NOT NULL")

STORE_ITEMS = Table(
    STORE_TABLE,
    Base.metadata,
    Column("prefix", Text().with_variant(Text(collation="C"), "postgresql"), nullable=False),
    Column("key", Text, nullable=False),
    Column("value", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("ttl_minutes", Float, nullable=True),
    PrimaryKeyConstraint("prefix", "key", name="pk_store_items"),
    Index("ix_store_items_expires_at", "expires_at", postgresql_where=_EXPIRING, sqlite_where=_EXPIRING),
)

STORE_VECTORS = Table(
    STORE_VECTORS_TABLE,
    Base.metadata,
    Column("prefix", Text().with_variant(Text(collation="C"), "postgresql"), nullable=False),
    Column("key", Text, nullable=False),
    Column("field", Text, nullable=False),
    Column("embedding", LargeBinary().with_variant(postgresql.ARRAY(REAL()), "postgresql"), nullable=False),
    PrimaryKeyConstraint("prefix", "key", "field", name="pk_store_vectors"),
    ForeignKeyConstraint(
        ["prefix", "key"],
        [STORE_ITEMS.c.prefix, STORE_ITEMS.c.key],
        name="fk_store_vectors_item",
        ondelete="CASCADE",
    ),
)
