"""Alembic environment for the host's tables.

The Gateway runs this with a live connection passed in ``config.attributes["connection"]``
(see ``deerflow_ext.persistence.migrate``); the command-line path (``alembic -c ...``) builds
its own engine from ``sqlalchemy.url``. Either way, autogenerate compares only the host's
metadata and skips every table an extension's ``table_prefix`` claims, so a host migration
never proposes to drop an extension's tables.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from deerflow_ext.persistence.migrate import host_include_object
from deerflow_ext.persistence.models import HOST_VERSION_TABLE, Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection | None = None, url: str | None = None) -> None:
    prefixes = tuple(config.attributes.get("table_prefixes", ()))
    context.configure(
        connection=connection,
        url=url,
        target_metadata=target_metadata,
        include_object=host_include_object(prefixes),
        version_table=HOST_VERSION_TABLE,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
        compare_type=True,
        literal_binds=connection is None,
    )


def run_migrations_offline() -> None:
    _configure(url=config.get_main_option("sqlalchemy.url"))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as conn:
        _configure(connection=conn)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
