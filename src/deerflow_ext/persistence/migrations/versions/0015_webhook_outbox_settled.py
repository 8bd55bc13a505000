"""webhook outbox settled index: the pruning of delivered and failed rows reads it

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07

Settled deliveries are deleted ``webhooks.keep_settled_days`` after they settled
(``deerflow_ext.webhooks.outbox``); the index lets that hourly prune find them by status and
settling time instead of reading every row it keeps.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_webhook_outbox_settled", "webhook_outbox", ["status", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_webhook_outbox_settled", table_name="webhook_outbox")
