"""Apply the host's migrations at startup, without an alembic.ini.

The script location is resolved from this package, so an installed wheel migrates itself.
Alembic is synchronous; the Gateway hands it the async engine's connection through
``run_sync`` instead of opening a second, blocking connection to the same database.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from .models import CHECKPOINT_TABLES
from .ownership import IncludeObject, prefix_include_object

__all__ = ["MIGRATIONS_DIR", "alembic_config", "host_include_object", "upgrade_head"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

MIGRATION_LOCK_KEY = 0x6465657266_6D6967  # "deerf" "mig": one key for every process of a deployment


def host_include_object(prefixes: Sequence[str]) -> IncludeObject:
    """The host's autogenerate filter: skip extension-owned and checkpointer tables.

    Extension tables are matched by prefix (``ownership.prefix_include_object``); the
    LangGraph checkpointer's tables share the database but are migrated by the saver's own
    ``setup()``, so a host revision must not propose to drop them either.
    """
    by_prefix = prefix_include_object(tuple(prefixes))

    def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", None)
        if table in CHECKPOINT_TABLES:
            return False
        return by_prefix(obj, name, type_, reflected, compare_to)

    return include_object


def alembic_config(
    *,
    url: str | None = None,
    connection: Connection | None = None,
    table_prefixes: Sequence[str] = (),
) -> Config:
    """A programmatic alembic ``Config`` for the host's migration chain."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        # ConfigParser interpolation: a literal % in a password must be doubled.
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["table_prefixes"] = tuple(table_prefixes)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


async def upgrade_head(engine: AsyncEngine, *, table_prefixes: Sequence[str] = ()) -> None:
    """``alembic upgrade head`` on ``engine``'s database, in one transaction."""

    def _upgrade(connection: Connection) -> None:
        command.upgrade(alembic_config(connection=connection, table_prefixes=table_prefixes), "head")

    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Several Gateway processes start at once against one database (scale-out):
            # the first migrates, the others wait here and then find nothing to do.
            await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
        await conn.run_sync(_upgrade)
