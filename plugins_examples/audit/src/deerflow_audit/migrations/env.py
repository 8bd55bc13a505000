"""alembic environment for the audit chain; only ever run through ``deerflow_audit.migrate``."""

from __future__ import annotations

from alembic import context
from deerflow_audit.migrate import VERSION_TABLE, include_object
from deerflow_audit.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - a misuse, not a code path
    raise RuntimeError("the audit migrations run on a connection: use deerflow_audit.migrate.upgrade()")

context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    include_object=include_object,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
