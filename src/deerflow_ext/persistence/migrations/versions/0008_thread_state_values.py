"""thread state values: what a thread search's ``values`` filter is matched against

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

A thread's state lives in its checkpoints, serialised for LangGraph, where no SQL can read
it. The run's end (and a state update, and a copy) writes the state's values here too, but
``messages``: the conversation is the bulk of a state and what a values filter never needs,
so each run writes a few hundred bytes, not the thread's whole history. Threads that ran
before this revision have none until their next run.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("threads", sa.Column("state_values", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("threads", "state_values")
