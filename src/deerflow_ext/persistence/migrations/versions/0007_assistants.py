"""assistants: named configurations of the graph, each version kept

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06

``assistants`` holds each assistant at its active version; ``assistant_versions`` every
version it had (the row a create or an update writes; LangGraph's ``latest`` copies one back).
The built-in ``lead_agent`` is written here, version 1, so that search, count and their
ordering and paging treat it as any other row; the Gateway refuses to change or delete it.
Its fields are this revision's own copy: a migration must write the same rows whenever it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CREATED = datetime(2025, 1, 1, tzinfo=UTC)
LEAD = {
    "assistant_id": "lead_agent",
    "graph_id": "lead_agent",
    "name": "lead_agent",
    "description": "DeerFlow's lead agent: answers, uses tools, delegates to subagents (task tool).",
    "config": {},
    "context": {},
    "metadata": {"created_by": "system"},
    "version": 1,
    "created_at": CREATED,
}


def _fields() -> list[sa.Column[Any]]:
    return [
        sa.Column("graph_id", sa.String(64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("context", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
    ]


def upgrade() -> None:
    assistants = op.create_table(
        "assistants",
        sa.Column("assistant_id", sa.String(64), nullable=False),
        *_fields(),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("assistant_id", name="pk_assistants"),
    )
    versions = op.create_table(
        "assistant_versions",
        sa.Column("assistant_id", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        *_fields(),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["assistant_id"],
            ["assistants.assistant_id"],
            name="fk_assistant_versions_assistant_id_assistants",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("assistant_id", "version", name="pk_assistant_versions"),
    )
    op.bulk_insert(assistants, [{**LEAD, "updated_at": CREATED}])
    op.bulk_insert(versions, [LEAD])


def downgrade() -> None:
    op.drop_table("assistant_versions")
    op.drop_table("assistants")
